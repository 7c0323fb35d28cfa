// The sidecar capability against a real kube-apiserver: pods of its node from an Informer,
// node addresses from the Node, passes on start / pod events / confirmation, an Event.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type AzureNode, buildAzureNode, IP, registerAzureNode } from '../../../lab/azure-layout.ts';
import { type ControlPlane, sharedControlPlane } from '../../../lab/control-plane.ts';
import { sh } from '../../../lab/netns.ts';
import { systemClock, waitFor } from '../../../shared/clock.ts';
import { parseSidecarEnv } from '../../../shared/contract.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import { EventRecorder } from '../../../shared/kube/events.ts';
import type { KubeList, KubeObject } from '../../../shared/kube/types.ts';
import { createLogger } from '../../../shared/log.ts';
import { Registry } from '../../../shared/metrics.ts';
import { CAPABILITIES } from '../../../sidecar/capabilities.ts';
import type { Capability } from '../../../sidecar/capability.ts';
import { DrainWatcher } from '../../../sidecar/drain/watcher.ts';
import { ToolRunner } from '../../../sidecar/runner.ts';

const log = createLogger('test', 'warn');
const uid = process.pid.toString(36);
const nodeName = `nf-node-${uid}`;
const ns = `nf-${uid}`;

async function staleLeft(l: AzureNode): Promise<number> {
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
  // Play kubelet: the IPs arrive through the status subresource.
  const pod = await client.get<KubeObject>(`/api/v1/namespaces/${ns}/pods/${name}`);
  await client.replace(`/api/v1/namespaces/${ns}/pods/${name}/status`, {
    ...pod,
    status: { phase: 'Running', podIP: ips[0], podIPs: ips.map((ip) => ({ ip })) },
  });
}

describe('netfilter-cleanup capability with a real API server', () => {
  let cp: ControlPlane;
  let client: KubeClient;
  let l: AzureNode;
  let cap: Capability;
  const metrics = new Registry();

  before(async () => {
    cp = await sharedControlPlane();
    client = cp.client();
    l = await buildAzureNode();
    await registerAzureNode(client, nodeName, ns);
    for (const p of l.pods) await createPod(client, p.name, p.ips, p.name === 'host-net');
  });
  after(async () => {
    await cap?.stop();
    await l?.destroy();
    client?.close();
  });

  it('is registered as a lazily loaded capability', async () => {
    const load = CAPABILITIES['netfilter-cleanup'];
    assert.ok(load, 'netfilter-cleanup in CAPABILITIES');
    assert.equal(typeof (await load()), 'function');
  });

  it('cleans on start (two passes a confirmation apart), records an Event and metrics', async () => {
    const config = parseSidecarEnv({
      DRAINGUARD_PROFILE: 'netfilter-cleanup',
      DRAINGUARD_FEATURES: 'netfilter-cleanup',
      DRAINGUARD_POD_NAME: 'drainguard-nf',
      DRAINGUARD_POD_NAMESPACE: ns,
      DRAINGUARD_NODE_NAME: nodeName,
      DRAINGUARD_CLEANUP_CONFIRM_SECONDS: '1',
      DRAINGUARD_CLEANUP_RESYNC_SECONDS: '3600',
    });
    const factory = await CAPABILITIES['netfilter-cleanup']!();
    cap = factory({
      config,
      log,
      client,
      events: new EventRecorder(client, 'drainguard-sidecar', nodeName, log),
      runner: new ToolRunner({ log, prefix: ['ip', 'netns', 'exec', l.node.ns] }),
      drain: new DrainWatcher({
        client,
        nodeName,
        podName: 'drainguard-nf',
        podNamespace: ns,
        drainTaints: config.drainTaints,
        log,
        clock: systemClock,
      }),
      metrics,
      clock: systemClock,
    });
    assert.equal(await staleLeft(l), l.staleSpecs.length);
    await cap.start();
    await waitFor('stale rules removed', async () => (await staleLeft(l)) === 0, {
      timeoutMs: 20_000,
      intervalMs: 200,
    });
    const neigh = await l.node.run(['ip', '-j', 'neigh', 'show']);
    assert.ok(!neigh.includes(`"${IP.reused}"`), 'stale neighbour of the reused IP removed');
    assert.ok(neigh.includes(`"${IP.masq}"`), 'ip-masq-agent neighbour kept');
    const ev = await waitFor(
      'cleanup Event on the Node',
      async () =>
        (await client.get<KubeList>('/api/v1/namespaces/default/events')).items?.find(
          (e) =>
            (e.involvedObject as { name?: string })?.name === nodeName && e.reason === 'NetfilterCleanup',
        ),
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    assert.match(String(ev.message), /removed 10 stale ebtables rule\(s\) and 4 neighbour\(s\)/);
    assert.match(metrics.render(), /drainguard_netfilter_removed_total\{dry_run="false",kind="rule"\} 10/);
  });

  it('a pod event triggers a pass: reinstalled rules go without waiting for the resync', async () => {
    await l.reinstall();
    assert.equal(await staleLeft(l), l.staleSpecs.length);
    await createPod(client, 'late-pod', ['198.51.100.40']);
    await waitFor('reinstalled rules removed after a pod event', async () => (await staleLeft(l)) === 0, {
      timeoutMs: 20_000,
      intervalMs: 200,
    });
    const prestop = await cap.prestop();
    assert.ok(Number(prestop.passes) >= 4, JSON.stringify(prestop));
  });

  it('the CLI reads pods and the Node from the API (no --pods-file)', async () => {
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
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines.length, l.staleSpecs.length, r.stdout);
    assert.ok(
      lines.some((x) => x.includes(`(pod ${ns}/lxc-health)`)),
      r.stdout,
    );
    const missing = await cli(['--node', 'no-such-node', '--netns', l.node.ns]);
    assert.equal(missing.code, 1);
    assert.match(
      missing.stderr,
      /reading pods\/node from the API failed: .*no Node named "no-such-node"; pass --node/,
    );
  });
});
