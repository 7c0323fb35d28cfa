// The chart on the lab cluster (real kubelets on containerd, Kubernetes 1.20.2), the way a
// MetalLB user installs it, with real helm 4.1.4 (then 3.17.2):
//   helm install with the locally built drainguard:dev (imagePullPolicy Never: nothing is pulled);
//   a speaker DaemonSet under the service account the chart was NOT told about (`speaker`, with
//   metallb.speakerServiceAccounts=[metallb-speaker]) is injected by namespace label and rollout
//   restart, and its sidecars are refused by the API server: Debian's Prometheus, scraping every
//   speaker's sidecar as the chart's PodMonitor does (the container port named drainguard on the
//   pod's IP: on the host network /metrics alone on the node's IP, /prestop not there) and the
//   webhook over HTTPS, and evaluating the chart's alerts file, fires DrainguardSidecarForbidden
//   on every node, then DrainguardWebhookDenials once the webhook refuses pods;
//   helm upgrade with the value fixed (and the image spelt differently, so the webhook rolls) under
//   steady admissions fails none, and the sidecars of the speakers, now MetalLB's (the lab's
//   simulator), sync their view; a Local Service whose only endpoint is on node-a, node-a cordoned:
//   its sidecar refuses the handover and the real Prometheus fires DrainguardL2HandoverRefused;
//   helm uninstall leaves nothing of the chart behind and pods are admitted again without the webhook.
// helm 3: install, upgrade (the webhook rolls), uninstall after deleting the webhook configuration.
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { type Cluster, startCluster } from '../../../lab/cluster/cluster.ts';
import { installMetalLbCrds } from '../../../lab/cluster/install.ts';
import { IDLE_ARGS } from '../../../lab/cluster/manifests.ts';
import { installSpeakers, LAB_POOL_HOSTS } from '../../../lab/cluster/metallb.ts';
import { type Pod as InjectedPod, sidecarStatus } from '../../../lab/cluster/pods.ts';
import { putLoadBalancer } from '../../../lab/sim/speaker/objects.ts';
import { waitFor } from '../../../shared/clock.ts';
import { CHART, parseDocs, releaseObjects, run, tool } from '../../unit/helm/render.ts';
import { withLogs } from './logs.ts';

const LAB_IMAGE = 'drainguard-lab:dev';
const T = { timeoutMs: 180_000, intervalMs: 500 };
const NS = 'drainguard-system';

interface Container {
  name: string;
  ports?: { name?: string; containerPort: number; hostPort?: number }[];
}
interface Pod extends InjectedPod {
  spec: InjectedPod['spec'] & {
    containers: Container[];
    initContainers?: (Container & { restartPolicy?: string })[];
  };
  status?: InjectedPod['status'] & { podIP?: string };
}

/** What the chart's PodMonitor scrapes on a pod: the container port named drainguard, on the pod's IP. */
function scrapeTarget(p: Pod): string {
  const port = [...(p.spec.initContainers ?? []), ...p.spec.containers]
    .flatMap((c) => c.ports ?? [])
    .find((x) => x.name === 'drainguard')?.containerPort;
  if (port === undefined || !p.status?.podIP)
    throw new Error(`${p.metadata.name}: no port named drainguard or no pod IP`);
  return `${p.status.podIP}:${port}`;
}

let c: Cluster;
const json = async <X>(args: string[]): Promise<X> => JSON.parse(await c.k([...args, '-o', 'json'])) as X;
const pods = async (ns: string, selector: string) =>
  (await json<{ items: Pod[] }>(['get', 'pods', '-n', ns, '-l', selector])).items;
const rollout = (ns: string, what: string) => c.k(['rollout', 'status', '-n', ns, what, '--timeout=180s']);
const helm = (name: 'helm4' | 'helm3', args: string[]) =>
  run(tool(name), [...args, '--kubeconfig', c.kubeconfigPath]);
const LAB_VALUES = ['image.repository=drainguard', 'image.tag=dev', 'image.pullPolicy=Never'];

const speakerDaemonSet = (serviceAccountName: string) => {
  const labels = { app: 'metallb', component: 'speaker' };
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: 'speaker', namespace: 'metallb-system', labels },
    spec: {
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          serviceAccountName,
          hostNetwork: true,
          terminationGracePeriodSeconds: 5,
          containers: [
            {
              name: 'speaker',
              image: LAB_IMAGE,
              imagePullPolicy: 'Never',
              args: IDLE_ARGS,
              ports: [{ name: 'memberlist-tcp', containerPort: 7946, protocol: 'TCP' }],
              securityContext: { capabilities: { add: ['NET_RAW'] } },
            },
          ],
        },
      },
    },
  };
};

/** Injected speaker pods newer than `old`, each with a Running and Ready drainguard sidecar. */
const injectedSpeakers = (old: Pod[]) =>
  waitFor(
    'three speaker pods, each with a Running and Ready sidecar',
    async () => {
      const now = (await pods('metallb-system', 'component=speaker')).filter(
        (p) => !old.some((o) => o.metadata.uid === p.metadata.uid),
      );
      const ok = now.filter((p) => {
        const s = sidecarStatus(p);
        return s?.ready && s.state?.running;
      });
      return ok.length === 3 ? ok : undefined;
    },
    T,
  );

/** The sidecar's /metrics on a node (hostNetwork: its loopback only). */
async function sidecarMetrics(node: string): Promise<string> {
  const r = await c.bed
    .node(node)
    .exec([
      process.execPath,
      '-e',
      "fetch('http://127.0.0.1:7480/metrics').then(r => r.text()).then(t => process.stdout.write(t))",
    ]);
  return r.code === 0 ? r.stdout : '';
}

/**
 * helm upgrade with `--set` values, the image spelt in full (the same local image) so the webhook
 * Deployment rolls; resolves once every old replica is gone (each drains 15 s, --drain-seconds).
 */
async function upgradeRollingWebhook(name: 'helm4' | 'helm3', values: string[]) {
  const webhookPods = () => pods(NS, 'app.kubernetes.io/component=webhook');
  const before = await webhookPods();
  const upgrade = helm(name, [
    'upgrade',
    'drainguard',
    CHART,
    '-n',
    NS,
    '--reuse-values',
    ...['image.repository=docker.io/library/drainguard', ...values].flatMap((v) => ['--set', v]),
  ]);
  if (upgrade.code !== 0) return upgrade;
  await rollout(NS, 'deployment/drainguard-webhook');
  await waitFor(
    'the old webhook replicas gone',
    async () => {
      const now = await webhookPods();
      return now.length > 0 && now.every((p) => !before.some((b) => b.metadata.uid === p.metadata.uid));
    },
    T,
  );
  return upgrade;
}

type Alert = { labels: Record<string, string>; state: string };

/**
 * Debian's Prometheus on node-a, evaluating the chart's alerts file, scraping what the chart's
 * PodMonitors would: each speaker's sidecar on its port named drainguard (on the host network, the
 * node's IP), and the webhook replicas over HTTPS with the CA from drainguard-webhook-tls; targets
 * labelled as the PodMonitors label them. `name` keeps each instance's files and port apart.
 */
async function startPrometheus(
  name: string,
  speakers: Pod[],
  port: number,
): Promise<{ alerts: () => Promise<Alert[]>; stop: () => void }> {
  const dir = join(c.dir, name);
  mkdirSync(dir, { recursive: true });
  const ca = await c.k([
    'get',
    'secret',
    '-n',
    NS,
    'drainguard-webhook-tls',
    '-o',
    'jsonpath={.data.ca\\.crt}',
  ]);
  writeFileSync(join(dir, 'ca.crt'), Buffer.from(ca, 'base64'));
  const webhooks = (
    await json<{ items: { metadata: { name: string }; status: { podIP: string } }[] }>([
      'get',
      'pods',
      '-n',
      NS,
      '-l',
      'app.kubernetes.io/component=webhook',
    ])
  ).items;
  writeFileSync(
    join(dir, 'prometheus.yml'),
    YAML.stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: [join(CHART, 'files', 'alerts.yaml')],
      scrape_configs: [
        {
          job_name: 'drainguard-sidecars',
          static_configs: speakers.map((p) => ({
            targets: [scrapeTarget(p)],
            labels: { namespace: 'metallb-system', pod: p.metadata.name, node: p.spec.nodeName },
          })),
        },
        {
          job_name: 'drainguard-webhook',
          scheme: 'https',
          tls_config: { ca_file: join(dir, 'ca.crt'), server_name: `drainguard-webhook.${NS}.svc` },
          static_configs: webhooks.map((w) => ({
            targets: [`${w.status.podIP}:8443`],
            labels: { namespace: NS, pod: w.metadata.name },
          })),
        },
      ],
    }),
  );
  const prometheus: ChildProcess = c.bed
    .node('node-a')
    .spawn(
      [
        tool('prometheus'),
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      { stdio: 'ignore' },
    );
  const alerts = async (): Promise<Alert[]> => {
    const r = await c.bed
      .node('node-a')
      .exec([
        process.execPath,
        '-e',
        `fetch('http://127.0.0.1:${port}/api/v1/alerts').then(r => r.text()).then(t => process.stdout.write(t))`,
      ]);
    if (r.code !== 0) return [];
    return (JSON.parse(r.stdout) as { data: { alerts: Alert[] } }).data.alerts;
  };
  return { alerts, stop: () => prometheus.kill('SIGTERM') };
}

t.before(async () => {
  c = await startCluster({ log: (l) => process.stdout.write(`# cluster: ${l}\n`) });
  // MetalLB's side as its Helm chart leaves it: namespace, CRDs, both service-account names exist.
  await installMetalLbCrds(c);
  for (const sa of ['speaker', 'metallb-speaker'])
    await c.k(['create', 'serviceaccount', '-n', 'metallb-system', sa]);
});
t.teardown(async () => {
  await c?.stop();
});

t.test(
  'helm 4: install, a refused sidecar fires the alert in a real Prometheus, upgrade, uninstall',
  async (t) =>
    withLogs(c, async () => {
      const install = helm('helm4', [
        'install',
        'drainguard',
        CHART,
        '-n',
        NS,
        '--create-namespace',
        ...LAB_VALUES.flatMap((v) => ['--set', v]),
        '--set',
        'metallb.speakerServiceAccounts={metallb-speaker}',
      ]);
      t.equal(install.code, 0, install.stderr);
      await rollout(NS, 'deployment/drainguard-webhook');
      const manifest = parseDocs(helm('helm4', ['get', 'manifest', 'drainguard', '-n', NS]).stdout);
      t.equal(manifest.find((o) => o.kind === 'PodDisruptionBudget')?.apiVersion, 'policy/v1');

      // A speaker under `speaker`, which this install does not grant: injected, then refused (403).
      await c.k(['apply', '-f', '-'], { input: JSON.stringify(speakerDaemonSet('speaker')) });
      await rollout('metallb-system', 'daemonset/speaker');
      const plain = await pods('metallb-system', 'component=speaker');
      t.ok(
        plain.every((p) => p.spec.containers.length === 1),
        'not injected before the label',
      );
      await c.k(['label', 'namespace', 'metallb-system', 'drainguard.io/inject=enabled']);
      await c.k(['rollout', 'restart', '-n', 'metallb-system', 'daemonset/speaker']);
      await rollout('metallb-system', 'daemonset/speaker');
      const refused = await injectedSpeakers(plain);
      // hostNetwork: the sidecar declares one port, /metrics alone on the node's IP (the pod's IP).
      const targets = new Map(refused.map((p) => [p.spec.nodeName as string, scrapeTarget(p)]));
      t.strictSame(
        [...new Set([...targets.values()].map((x) => x.split(':')[1]))],
        ['7490'],
        "the speaker profile's metrics port on every node",
      );
      const fromA = async (url: string) => {
        const r = await c.bed
          .node('node-a')
          .exec([
            process.execPath,
            '-e',
            `fetch(${JSON.stringify(url)}, { method: 'POST' }).then(r => process.stdout.write(String(r.status)), e => process.stdout.write('refused'))`,
          ]);
        return r.stdout;
      };
      const onB = targets.get('node-b') as string;
      const nodeB = onB.split(':')[0] as string;
      t.equal(await fromA(`http://${onB}/prestop`), '404', "node-b's /prestop is not served on its IP");
      t.equal(await fromA(`http://${nodeB}:7480/readyz`), 'refused', 'its main listener is on loopback only');

      // Debian's Prometheus on node-a scrapes every speaker's sidecar across the network and the
      // webhook replicas, and evaluates the chart's alerts file.
      const prometheus = await startPrometheus('prometheus', refused, 19090);
      try {
        const { alerts } = prometheus;
        const fired = await waitFor(
          'DrainguardSidecarForbidden firing in Prometheus for the sidecar on every node',
          async () => {
            const firing = (await alerts()).filter(
              (a) => a.labels.alertname === 'DrainguardSidecarForbidden' && a.state === 'firing',
            );
            return firing.length === refused.length ? firing : undefined;
          },
          T,
        );
        t.strictSame(
          fired
            .map((a) => ({ pod: a.labels.pod, node: a.labels.node, severity: a.labels.severity }))
            .sort((x, y) => String(x.node).localeCompare(String(y.node))),
          refused
            .map((p) => ({ pod: p.metadata.name, node: p.spec.nodeName, severity: 'warning' }))
            .sort((x, y) => String(x.node).localeCompare(String(y.node))),
        );
        t.notOk(
          (await alerts()).some((a) => a.labels.alertname === 'DrainguardL2HandoverRefused'),
          'a healthy alert stays silent',
        );
        t.notOk(
          (await alerts()).some((a) => a.labels.alertname === 'DrainguardWebhookDenials'),
          'no denial yet, no webhook alert',
        );
        // A speaker pod without hostNetwork is refused by the webhook (the L2 profile needs the
        // node's network): the webhook's scraped counter rises and the alert fires.
        const refusedPod = JSON.stringify({
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: {
            generateName: 'speaker-',
            namespace: 'metallb-system',
            labels: { app: 'metallb', component: 'speaker' },
          },
          spec: { containers: [{ name: 'speaker', image: LAB_IMAGE, args: IDLE_ARGS }] },
        });
        const denial = await waitFor(
          'DrainguardWebhookDenials firing in Prometheus (a refused pod each poll)',
          async () => {
            const r = await c.kubectl(['create', '--dry-run=server', '-f', '-'], { input: refusedPod });
            if (r.code === 0) throw new Error('a speaker pod without hostNetwork was admitted');
            return (await alerts()).find(
              (a) => a.labels.alertname === 'DrainguardWebhookDenials' && a.state === 'firing',
            );
          },
          T,
        );
        t.equal(denial.labels.namespace, NS);
      } finally {
        prometheus.stop();
      }

      // helm upgrade: the value fixed, the image spelt in full (the same local image: the webhook
      // Deployment rolls), under steady admissions in an opted-in namespace.
      await c.k(['create', 'namespace', 'admit-load']);
      await c.k(['label', 'namespace', 'admit-load', 'drainguard.io/inject=enabled']);
      const pod = JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { generateName: 'admit-', namespace: 'admit-load' },
        spec: { containers: [{ name: 'main', image: LAB_IMAGE, args: IDLE_ARGS }] },
      });
      let stop = false;
      let ok = 0;
      const failed: string[] = [];
      const load = (async () => {
        while (!stop) {
          const r = await c.kubectl(['create', '--dry-run=server', '-o', 'name', '-f', '-'], { input: pod });
          if (r.code === 0) ok++;
          else failed.push(r.stderr.trim());
        }
      })();
      try {
        await waitFor('admissions flowing', () => ok >= 5, T);
        // The value fixed, and the webhook rolls.
        const upgrade = await upgradeRollingWebhook('helm4', [
          'metallb.speakerServiceAccounts={speaker,metallb-speaker}',
        ]);
        t.equal(upgrade.code, 0, upgrade.stderr);
        const at = ok;
        await waitFor('admissions by the new replicas', () => ok >= at + 5, T);
      } finally {
        stop = true;
        await load;
      }
      t.strictSame(
        failed,
        [],
        `${failed.length} of ${ok + failed.length} admissions failed during the upgrade`,
      );
      process.stdout.write(`# helm upgrade: ${ok} admissions, 0 failed\n`);

      // Granted now: the speakers, rolled out again as MetalLB's (the lab's speaker simulator, its
      // configuration and grants), get sidecars that read their Node.
      const refusedPods = await pods('metallb-system', 'component=speaker');
      // Deleted first: apply over it would merge the simulator's TCP and UDP 7946 ports by
      // containerPort; its pods must be gone before new ones can take their host ports.
      await c.k([
        'delete',
        'daemonset',
        '-n',
        'metallb-system',
        'speaker',
        '--cascade=foreground',
        '--wait=true',
        '--timeout=120s',
      ]);
      await installSpeakers(c, { inject: false });
      const speakers = await injectedSpeakers(refusedPods);
      for (const p of speakers)
        await waitFor(
          `${p.spec.nodeName}: the sidecar's API view synced`,
          async () => /^drainguard_api_view_synced 1$/m.test(await sidecarMetrics(p.spec.nodeName as string)),
          T,
        );

      // A drain whose VIP has nowhere to go: an externalTrafficPolicy Local Service whose only
      // ready endpoint is on node-a. node-a's sidecar refuses the handover (never strand a VIP),
      // its drainguard_l2_handover_impossible turns 1, and the real Prometheus fires the alert.
      const vip = c.bed.addr4(LAB_POOL_HOSTS[0] + 50);
      await c.k(['create', 'namespace', 'web']);
      const client = c.client();
      try {
        await putLoadBalancer(client, {
          name: 'local',
          namespace: 'web',
          vip,
          local: true,
          endpoints: [{ node: 'node-a', ip: c.bed.node('node-a').ipv4 }],
        });
      } finally {
        client.close();
      }
      await waitFor(
        "node-a's speaker announces the Local VIP (its ServiceL2Status)",
        async () =>
          (
            await json<{ items: { status?: { node?: string; serviceName?: string } }[] }>([
              'get',
              'servicel2statuses.metallb.io',
              '-n',
              'metallb-system',
            ])
          ).items.some((x) => x.status?.node === 'node-a' && x.status.serviceName === 'local'),
        T,
      );
      const refusing = await startPrometheus('prometheus-refused', speakers, 19091);
      const onA = speakers.find((p) => p.spec.nodeName === 'node-a') as Pod;
      try {
        await c.k(['cordon', 'node-a']);
        const started = Date.now();
        // The rule holds for 1 m before it fires.
        const refusedAlert = await waitFor(
          'DrainguardL2HandoverRefused firing in Prometheus for node-a',
          async () =>
            (await refusing.alerts()).find(
              (a) => a.labels.alertname === 'DrainguardL2HandoverRefused' && a.state === 'firing',
            ),
          { ...T, intervalMs: 2_000 },
        );
        t.strictSame(
          {
            pod: refusedAlert.labels.pod,
            node: refusedAlert.labels.node,
            namespace: refusedAlert.labels.namespace,
          },
          { pod: onA.metadata.name, node: 'node-a', namespace: 'metallb-system' },
        );
        process.stdout.write(
          `# DrainguardL2HandoverRefused fired ${((Date.now() - started) / 1000).toFixed(1)} s after the cordon (rule: for 1m)\n`,
        );
        const event = await c.k([
          'get',
          'events',
          '-n',
          'default',
          '--field-selector',
          'reason=L2HandoverImpossible,involvedObject.name=node-a',
          '-o',
          'jsonpath={.items[*].message}',
        ]);
        t.match(event, /web\/local/, 'the Event on node-a names the service');
        t.notMatch(
          await c.k(['get', 'node', 'node-a', '-o', 'jsonpath={.metadata.labels}']),
          /exclude-from-external-load-balancers/,
          'node-a not labelled: its VIP keeps being announced',
        );
      } finally {
        refusing.stop();
        await c.k(['uncordon', 'node-a']);
        await c.kubectl(['delete', 'namespace', 'web', '--wait=false']);
      }

      // helm uninstall: nothing of the chart left, and pods are admitted without the webhook.
      const uninstall = helm('helm4', ['uninstall', 'drainguard', '-n', NS]);
      t.equal(uninstall.code, 0, uninstall.stderr);
      const left = await c.kubectl(releaseObjects());
      t.equal(left.stdout.trim(), '', `left behind:\n${left.stdout}`);
      t.match((await c.kubectl(['get', 'mutatingwebhookconfiguration', 'drainguard'])).stderr, /NotFound/);
      const admitted = await c.kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], {
        input: pod,
      });
      t.equal(admitted.code, 0, admitted.stderr);
      t.equal((JSON.parse(admitted.stdout) as Pod).spec.containers.length, 1, 'admitted, not injected');
      await c.kubectl(['delete', 'namespace', 'admit-load', '--wait=false']);
      await c.kubectl([
        'delete',
        '-n',
        'metallb-system',
        'daemonset/speaker',
        '--wait=true',
        '--timeout=120s',
      ]);
    }),
);

t.test(
  'helm 3: install, webhook Ready, upgrade (the webhook rolls), uninstall after deleting the webhook configuration (README)',
  async (t) =>
    withLogs(c, async () => {
      const install = helm('helm3', [
        'install',
        'drainguard',
        CHART,
        '-n',
        NS,
        ...LAB_VALUES.flatMap((v) => ['--set', v]),
      ]);
      t.equal(install.code, 0, install.stderr);
      await rollout(NS, 'deployment/drainguard-webhook');
      const manifest = parseDocs(helm('helm3', ['get', 'manifest', 'drainguard', '-n', NS]).stdout);
      t.equal(manifest.find((o) => o.kind === 'PodDisruptionBudget')?.apiVersion, 'policy/v1');
      // helm 3 upgrade: the webhook rolls.
      const upgrade = await upgradeRollingWebhook('helm3', []);
      t.equal(upgrade.code, 0, upgrade.stderr);
      t.equal(
        await c.k([
          'get',
          'deployment',
          '-n',
          NS,
          'drainguard-webhook',
          '-o',
          'jsonpath={.spec.template.spec.containers[0].image}',
        ]),
        'docker.io/library/drainguard:dev',
      );
      t.match(helm('helm3', ['history', 'drainguard', '-n', NS]).stdout, /^2\s.*deployed/m);
      await c.k(['delete', 'mutatingwebhookconfiguration', 'drainguard']);
      const uninstall = helm('helm3', ['uninstall', 'drainguard', '-n', NS]);
      t.equal(uninstall.code, 0, uninstall.stderr);
      const left = await c.kubectl(releaseObjects());
      t.equal(left.stdout.trim(), '', `left behind:\n${left.stdout}`);
    }),
);
