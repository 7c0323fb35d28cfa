// The sidecar feature against a real kube-apiserver: pods of its node from an Informer,
// node addresses from the Node, passes on start / pod events / confirmation, an Event.
import t from 'tap';
import {
  type AzureScene,
  buildAzureScene,
  IP,
  registerAzureNode,
  TUNNEL_MAC,
} from '../../../lab/bed/azure-scene.ts';
import { type ControlPlane, sharedControlPlane, UNPRIVILEGED_USER } from '../../../lab/bed/control-plane.ts';
import { sh } from '../../../lab/bed/netns.ts';
import { systemClock, waitFor } from '../../../shared/clock.ts';
import { parseSidecarEnv } from '../../../shared/contract-env.ts';
import { KubeClient } from '../../../shared/kube/client.ts';
import { EventRecorder } from '../../../shared/kube/events.ts';
import type { KubeList, KubeObject } from '../../../shared/kube/types.ts';
import { createLogger } from '../../../shared/log.ts';
import { Registry } from '../../../shared/metrics.ts';
import { DrainWatcher } from '../../../sidecar/drain/watcher.ts';
import type { Feature } from '../../../sidecar/feature.ts';
import { FEATURE_MODULES } from '../../../sidecar/features.ts';
import { ToolRunner } from '../../../sidecar/runner.ts';

const log = createLogger('test', 'warn');
const uid = process.pid.toString(36);
const nodeName = `nf-node-${uid}`;
const ns = `nf-${uid}`;

async function staleLeft(l: AzureScene): Promise<number> {
  const text = await l.node.run(['ebtables', '-t', 'nat', '-L', 'PREROUTING']);
  return l.staleSpecs.filter((s) => text.includes(s)).length;
}

async function createPod(
  client: KubeClient,
  name: string,
  ips: string[],
  hostNetwork = false,
): Promise<void> {
  await client.create(`/api/v1/namespaces/${ns}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns },
    spec: {
      nodeName,
      hostNetwork,
      automountServiceAccountToken: false,
      containers: [{ name: 'c', image: 'example.invalid/c' }],
    },
  });
  // Play kubelet: the IPs arrive through the status subresource (none yet: still being wired).
  if (ips.length === 0) return;
  const pod = await client.get<KubeObject>(`/api/v1/namespaces/${ns}/pods/${name}`);
  await client.replace(`/api/v1/namespaces/${ns}/pods/${name}/status`, {
    ...pod,
    status: { phase: 'Running', podIP: ips[0], podIPs: ips.map((ip) => ({ ip })) },
  });
}

/** A feature on the azure node: `client` is what it talks to the API with; Events go via `admin`. */
async function startFeature(
  l: AzureScene,
  client: KubeClient,
  admin: KubeClient,
  metrics: Registry,
  env: Record<string, string> = {},
): Promise<Feature> {
  const config = parseSidecarEnv({
    DRAINGUARD_PROFILE: 'netfilter-cleanup',
    DRAINGUARD_FEATURES: 'netfilter-cleanup',
    DRAINGUARD_POD_NAME: 'drainguard-nf',
    DRAINGUARD_POD_NAMESPACE: ns,
    DRAINGUARD_NODE_NAME: nodeName,
    DRAINGUARD_CLEANUP_CONFIRM_SECONDS: '1',
    DRAINGUARD_CLEANUP_RESYNC_SECONDS: '3600',
    ...env,
  });
  const drain = new DrainWatcher({
    client,
    nodeName,
    podName: 'drainguard-nf',
    podNamespace: ns,
    drainTaints: config.drainTaints,
    log,
    clock: systemClock,
  });
  const factory = await FEATURE_MODULES['netfilter-cleanup']!();
  const cap = factory({
    config,
    log,
    client,
    events: new EventRecorder(admin, 'drainguard-sidecar', nodeName, log),
    runner: new ToolRunner({ log, prefix: ['ip', 'netns', 'exec', l.node.ns] }),
    drain,
    api: drain.api,
    metrics,
    clock: systemClock,
  });
  await cap.start();
  return cap;
}

/** Sum of a counter/gauge's samples whose labels contain `labels` (e.g. `result="held"`). */
function metricValue(m: Registry, name: string, labels: string): number {
  let sum = 0;
  for (const line of m.render().split('\n'))
    if (line.startsWith(`${name}{`) && line.includes(labels)) sum += Number(line.split(' ').pop());
  return sum;
}

async function natRules(l: AzureScene): Promise<string> {
  return l.node.run(['ebtables', '-t', 'nat', '-L']);
}

t.test('netfilter-cleanup feature with a real API server', async (t) => {
  let cp: ControlPlane;
  let client: KubeClient;
  let l: AzureScene;
  let cap: Feature;
  const metrics = new Registry();

  t.before(async () => {
    cp = await sharedControlPlane();
    client = cp.client();
    l = await buildAzureScene();
    await registerAzureNode(client, nodeName, ns);
    for (const p of l.pods) await createPod(client, p.name, p.ips, p.name === 'host-net');
  });
  t.teardown(async () => {
    await cap?.stop();
    await l?.destroy();
    client?.close();
  });

  t.test('is registered as a lazily loaded feature', async (t) => {
    const load = FEATURE_MODULES['netfilter-cleanup'];
    if (!load) throw new Error('netfilter-cleanup not in FEATURE_MODULES');
    t.equal(typeof (await load()), 'function');
  });

  /** Runs a feature on `api` for three passes (more than the 1 s confirmation) and checks nothing went. */
  async function heldThrough(api: KubeClient, during?: () => Promise<void>): Promise<Registry> {
    const before = await natRules(l);
    const m = new Registry();
    const c = await startFeature(l, api, client, m, { DRAINGUARD_CLEANUP_RESYNC_SECONDS: '1' });
    try {
      await during?.();
      // Without the hold, the second of these passes deleted every stale-looking rule.
      await waitFor(
        'three passes',
        async () => metricValue(m, 'drainguard_netfilter_passes_total', 'result=') >= 3,
        { timeoutMs: 20_000, intervalMs: 100 },
      );
    } finally {
      await c.stop();
    }
    t.equal(await natRules(l), before, 'no rule touched');
    t.ok(metricValue(m, 'drainguard_netfilter_passes_total', 'result="held"') >= 3, 'the passes were held');
    t.equal(metricValue(m, 'drainguard_netfilter_removed_total', 'kind='), 0);
    return m;
  }

  t.test(
    'never deletes on a pod view it cannot read: API unreachable (defect: empty view deleted live tunnel rules)',
    async (_t) => {
      // A port nothing listens on: every list fails with ECONNREFUSED.
      const dead = new KubeClient({ ...cp.target, server: 'https://127.0.0.1:9' });
      await heldThrough(dead);
    },
  );

  t.test('a 403 on the pod list raises NetfilterCleanupDegraded and deletes nothing', async (t) => {
    const nobody = new KubeClient(cp.userTarget(UNPRIVILEGED_USER));
    try {
      await heldThrough(nobody, async () => {
        const ev = await waitFor(
          'NetfilterCleanupDegraded on the Node',
          async () =>
            (await client.get<KubeList>('/api/v1/namespaces/default/events')).items?.find(
              (e) =>
                (e.involvedObject as { name?: string })?.name === nodeName &&
                e.reason === 'NetfilterCleanupDegraded',
            ),
          { timeoutMs: 15_000, intervalMs: 200 },
        );
        t.match(String(ev.message), /cannot read this node's pods .*forbidden.*needs RBAC: pods list\/watch/);
        t.equal(ev.type, 'Warning');
      });
    } finally {
      nobody.close();
    }
  });

  t.test('cleans on start (two passes a confirmation apart), records an Event and metrics', async (t) => {
    cap = await startFeature(l, client, client, metrics);
    await waitFor('stale rules removed', async () => (await staleLeft(l)) === 0, {
      timeoutMs: 20_000,
      intervalMs: 200,
    });
    const neigh = await l.node.run(['ip', '-j', 'neigh', 'show']);
    t.ok(!neigh.includes(`"${IP.reused}"`), 'stale neighbour of the reused IP removed');
    t.ok(neigh.includes(`"${IP.masq}"`), 'ip-masq-agent neighbour kept');
    const ev = await waitFor(
      'cleanup Event on the Node',
      async () =>
        (await client.get<KubeList>('/api/v1/namespaces/default/events')).items?.find(
          (e) =>
            (e.involvedObject as { name?: string })?.name === nodeName && e.reason === 'NetfilterCleanup',
        ),
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    t.match(String(ev.message), /removed 10 stale ebtables rule\(s\) and 4 neighbour\(s\)/);
    t.match(metrics.render(), /drainguard_netfilter_removed_total\{dry_run="false",kind="rule"\} 10/);
  });

  t.test('a pod event triggers a pass: reinstalled rules go without waiting for the resync', async (t) => {
    await l.reinstall();
    t.equal(await staleLeft(l), l.staleSpecs.length);
    await createPod(client, 'late-pod', ['198.51.100.40']);
    await waitFor('reinstalled rules removed after a pod event', async () => (await staleLeft(l)) === 0, {
      timeoutMs: 20_000,
      intervalMs: 200,
    });
    const prestop = await cap.prestop();
    t.ok(Number(prestop.passes) >= 4, JSON.stringify(prestop));
  });

  t.test('rules a CNI installed for a pod whose IP is not in the API yet are kept until it is', async (t) => {
    await cap.stop();
    const m = new Registry();
    cap = await startFeature(l, client, client, m, { DRAINGUARD_CLEANUP_RESYNC_SECONDS: '1' });
    const ip = '198.51.100.61';
    await createPod(client, 'no-ip-yet', []);
    const passes = async () => Number((await cap.prestop()).passes);
    const seen = await passes();
    await waitFor('a pass after the pod appeared', async () => (await passes()) > seen, {
      timeoutMs: 10_000,
      intervalMs: 100,
    });
    // CNI ADD, tunnel mode: the rules point at the shared gateway MAC; the kubelet writes the IP later.
    const rules = [
      `-p ARP --arp-op Request --arp-ip-dst ${ip} -j arpreply --arpreply-mac ${TUNNEL_MAC}`,
      `-p IPv4 -i eth0 --ip-dst ${ip} -j dnat --to-dst ${TUNNEL_MAC} --dnat-target ACCEPT`,
    ];
    for (const r of rules) await l.node.run(['sh', '-c', `ebtables -t nat -A PREROUTING ${r}`]);
    await waitFor(
      'both rules confirmed stale-looking and held for the IP-less pod',
      async () => metricValue(m, 'drainguard_netfilter_held', 'why="pod_awaiting_ip"') === 2,
      { timeoutMs: 15_000, intervalMs: 100 },
    );
    t.equal((await natRules(l)).split(ip).length - 1, 2, 'both rules still there');
    // The kubelet's status write, and the pod's neighbour on its route device: now plainly live.
    await l.node.run([
      'ip',
      'neigh',
      'replace',
      ip,
      'lladdr',
      TUNNEL_MAC,
      'dev',
      'azure0',
      'nud',
      'permanent',
    ]);
    const pod = await client.get<KubeObject>(`/api/v1/namespaces/${ns}/pods/no-ip-yet`);
    await client.replace(`/api/v1/namespaces/${ns}/pods/no-ip-yet/status`, {
      ...pod,
      status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] },
    });
    await waitFor(
      'nothing held once the IP is in the API',
      async () => metricValue(m, 'drainguard_netfilter_held', 'why="pod_awaiting_ip"') === 0,
      { timeoutMs: 15_000, intervalMs: 100 },
    );
    t.equal((await natRules(l)).split(ip).length - 1, 2, 'live rules kept');
    for (const r of rules) await l.node.run(['sh', '-c', `ebtables -t nat -D PREROUTING ${r}`]);
  });

  t.test('the CLI reads pods and the Node from the API (no --pods-file)', async (t) => {
    await cap.stop();
    await l.reinstall();
    const cli = (args: string[]) =>
      sh(
        [
          process.execPath,
          'cli/drainguard.ts',
          'netfilter-cleanup',
          '--once',
          '--kubeconfig',
          cp.kubeconfigPath,
          ...args,
        ],
        {
          timeoutMs: 60_000,
        },
      );
    const r = await cli(['--dry-run', '--node', nodeName, '--netns', l.node.ns, '--confirm-seconds', '0.2']);
    t.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    t.equal(lines.length, l.staleSpecs.length, r.stdout);
    t.ok(
      lines.some((x) => x.includes(`(pod ${ns}/lxc-health)`)),
      r.stdout,
    );
    // A pod of the node without an IP in the API yet: its CNI may have wired rules already.
    await createPod(client, 'cli-no-ip', []);
    const held = await cli(['--node', nodeName, '--netns', l.node.ns, '--confirm-seconds', '0.2']);
    t.equal(held.code, 0, held.stderr);
    t.match(held.stdout, /\d+ item\(s\) kept: a pod of \S+ has no IP in the API yet/);
    t.equal(await staleLeft(l), l.staleSpecs.length, 'nothing deleted while a pod awaits its IP');
    await client.delete(`/api/v1/namespaces/${ns}/pods/cli-no-ip`, { query: { gracePeriodSeconds: 0 } });
    const missing = await cli(['--node', 'no-such-node', '--netns', l.node.ns]);
    t.equal(missing.code, 1);
    t.match(
      missing.stderr,
      /reading pods\/node from the API failed: .*no Node named "no-such-node"; pass --node/,
    );
  });
});
