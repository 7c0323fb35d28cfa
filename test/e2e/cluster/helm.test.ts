// The chart on the lab cluster (real kubelets on containerd, Kubernetes 1.20.2), the way a
// MetalLB user installs it, with real helm 4.1.4 (then 3.17.2):
//   helm install with the locally built drainguard:dev (imagePullPolicy Never: nothing is pulled);
//   a speaker DaemonSet under the service account the chart was NOT told about (`speaker`, with
//   metallb.speakerServiceAccounts=[metallb-speaker]) is injected by namespace label and rollout
//   restart, and its sidecar is refused by the API server: Debian's Prometheus, scraping that
//   sidecar on its node and the webhook over HTTPS and evaluating the chart's alerts file, fires
//   DrainguardSidecarForbidden, then DrainguardWebhookDenials once the webhook refuses pods;
//   helm upgrade with the value fixed (and the image spelt differently, so the webhook rolls) under
//   steady admissions fails none, and the sidecars' view syncs;
//   helm uninstall leaves nothing of the chart behind and pods are admitted again without the webhook.
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { type Cluster, startCluster } from '../../../lab/cluster/cluster.ts';
import { installMetalLbCrds } from '../../../lab/cluster/install.ts';
import { IDLE_ARGS } from '../../../lab/cluster/manifests.ts';
import { waitFor } from '../../../shared/clock.ts';
import { CHART, parseDocs, releaseObjects, run, tool } from '../../unit/helm/render.ts';
import { withLogs } from './logs.ts';

const LAB_IMAGE = 'drainguard-lab:dev';
const T = { timeoutMs: 180_000, intervalMs: 500 };
const NS = 'drainguard-system';

interface Pod {
  metadata: { name: string; uid: string };
  spec: { nodeName?: string; containers: { name: string }[] };
  status?: { containerStatuses?: { name: string; ready: boolean; state?: { running?: object } }[] };
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
      const ok = now.filter((p) =>
        p.status?.containerStatuses?.some((s) => s.name === 'drainguard' && s.ready && s.state?.running),
      );
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
      t.equal(manifest.find((o) => o.kind === 'PodDisruptionBudget')?.apiVersion, 'policy/v1beta1');

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
      const onA = refused.find((p) => p.spec.nodeName === 'node-a');
      if (!onA) throw new Error('no speaker pod on node-a');

      // Debian's Prometheus on node-a scrapes that sidecar and the webhook replicas (HTTPS, the CA
      // from the Secret the PodMonitor names; labelled as the PodMonitors would) and evaluates the
      // chart's alerts file.
      const dir = join(c.dir, 'prometheus');
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
              static_configs: [
                {
                  targets: ['127.0.0.1:7480'],
                  labels: { namespace: 'metallb-system', pod: onA.metadata.name, node: 'node-a' },
                },
              ],
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
            '--web.listen-address=127.0.0.1:19090',
          ],
          { stdio: 'ignore' },
        );
      try {
        const alerts = async () => {
          const r = await c.bed
            .node('node-a')
            .exec([
              process.execPath,
              '-e',
              "fetch('http://127.0.0.1:19090/api/v1/alerts').then(r => r.text()).then(t => process.stdout.write(t))",
            ]);
          if (r.code !== 0) return [];
          return (
            JSON.parse(r.stdout) as { data: { alerts: { labels: Record<string, string>; state: string }[] } }
          ).data.alerts;
        };
        const fired = await waitFor(
          'DrainguardSidecarForbidden firing in Prometheus',
          async () =>
            (await alerts()).find(
              (a) => a.labels.alertname === 'DrainguardSidecarForbidden' && a.state === 'firing',
            ),
          T,
        );
        t.strictSame(
          { pod: fired.labels.pod, node: fired.labels.node, severity: fired.labels.severity },
          { pod: onA.metadata.name, node: 'node-a', severity: 'warning' },
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
        prometheus.kill('SIGTERM');
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
      const before = await pods(NS, 'app.kubernetes.io/component=webhook');
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
        const upgrade = helm('helm4', [
          'upgrade',
          'drainguard',
          CHART,
          '-n',
          NS,
          '--reuse-values',
          '--set',
          'image.repository=docker.io/library/drainguard',
          '--set',
          'metallb.speakerServiceAccounts={speaker,metallb-speaker}',
        ]);
        t.equal(upgrade.code, 0, upgrade.stderr);
        await rollout(NS, 'deployment/drainguard-webhook');
        await waitFor(
          'the old webhook replicas gone',
          async () =>
            (await pods(NS, 'app.kubernetes.io/component=webhook')).every(
              (p) => !before.some((b) => b.metadata.uid === p.metadata.uid),
            ),
          T,
        );
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

      // Granted now: restarted speakers' sidecars read their Node.
      const refusedPods = await pods('metallb-system', 'component=speaker');
      await c.k(['rollout', 'restart', '-n', 'metallb-system', 'daemonset/speaker']);
      await rollout('metallb-system', 'daemonset/speaker');
      for (const p of await injectedSpeakers(refusedPods))
        await waitFor(
          `${p.spec.nodeName}: the sidecar's API view synced`,
          async () => /^drainguard_api_view_synced 1$/m.test(await sidecarMetrics(p.spec.nodeName as string)),
          T,
        );

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
  'helm 3: install, webhook Ready, uninstall after deleting the webhook configuration (README)',
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
      t.equal(manifest.find((o) => o.kind === 'PodDisruptionBudget')?.apiVersion, 'policy/v1beta1');
      await c.k(['delete', 'mutatingwebhookconfiguration', 'drainguard']);
      const uninstall = helm('helm3', ['uninstall', 'drainguard', '-n', NS]);
      t.equal(uninstall.code, 0, uninstall.stderr);
      const left = await c.kubectl(releaseObjects());
      t.equal(left.stdout.trim(), '', `left behind:\n${left.stdout}`);
    }),
);
