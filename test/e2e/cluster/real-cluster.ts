// The lab cluster is a real one: real kubelets on containerd run our images, controllers
// replace pods, kubectl drain evicts, the kubelet runs preStop hooks before SIGTERM, and the webhook
// installed from manifests/ injects a sidecar that reaches the API server in-cluster.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import type { Cluster } from '../../../lab/cluster/cluster.ts';
import { deployment, IDLE_ARGS } from '../../../lab/cluster/manifests.ts';
import { type Pod as InjectedPod, sidecarMode, sidecarStatus } from '../../../lab/cluster/pods.ts';
import { CONTAINERD_VERSION, KUBERNETES_VERSION } from '../../../lab/versions.ts';
import { waitFor } from '../../../shared/clock.ts';
import { ANNOTATIONS } from '../../../shared/names.ts';
import { withLogs } from './logs.ts';
import { cluster, installed } from './shared.ts';

const LAB_IMAGE = 'drainguard-lab:dev';
const IMAGE = 'drainguard:dev';
const T = { timeoutMs: 120_000, intervalMs: 250 };

interface Pod extends InjectedPod {
  metadata: InjectedPod['metadata'] & { labels?: Record<string, string> };
  status?: InjectedPod['status'] & { phase?: string };
}

let c: Cluster;
const json = async <X>(args: string[]): Promise<X> => JSON.parse(await c.k([...args, '-o', 'json'])) as X;
const pods = async (ns: string, selector: string) =>
  (await json<{ items: Pod[] }>(['get', 'pods', '-n', ns, '-l', selector])).items;
const apply = (doc: object) => c.k(['apply', '-f', '-'], { input: JSON.stringify(doc) });
const rollout = (ns: string, what: string) => c.k(['rollout', 'status', '-n', ns, what, '--timeout=180s']);

const idle = IDLE_ARGS;

t.test('lab cluster on real kubelets', { timeout: 900_000 }, async (t) => {
  t.before(async () => {
    c = await cluster();
  });
  // The next suites drain nodes and install their own speakers: nothing of ours in the way.
  // Foreground: the delete returns once the pods are gone too — a DaemonSet pod left behind by
  // the background garbage collector makes the next suite's `kubectl drain` fail ("cannot delete
  // daemonsets.apps "idle-host" not found"; CI on f7ee8b1).
  t.teardown(async () => {
    await c?.kubectl([
      'delete',
      '-n',
      'default',
      'deployment/idle',
      'deployment/drainee',
      'daemonset/idle-host',
      '--cascade=foreground',
      '--wait=true',
      '--timeout=120s',
    ]);
    await c?.kubectl([
      'delete',
      '-n',
      'metallb-system',
      'daemonset/speaker',
      '--wait=true',
      '--timeout=120s',
    ]);
    await c?.kubectl(['label', 'namespace', 'metallb-system', 'drainguard.io/inject-']);
  });

  t.test('three Ready nodes on containerd', async (t) => {
    const nodes = await json<{
      items: {
        metadata: { name: string };
        status: { nodeInfo: { containerRuntimeVersion: string; kubeletVersion: string } };
      }[];
    }>(['get', 'nodes']);
    t.strictSame(nodes.items.map((n) => n.metadata.name).sort(), ['node-a', 'node-b', 'node-c']);
    for (const n of nodes.items) {
      t.equal(n.status.nodeInfo.containerRuntimeVersion, `containerd://${CONTAINERD_VERSION}`);
      t.equal(n.status.nodeInfo.kubeletVersion, `v${KUBERNETES_VERSION}`);
    }
  });

  t.test(
    'a Deployment and a hostNetwork DaemonSet of our image run everywhere; rollout restart replaces them',
    async (t) =>
      withLogs(c, async () => {
        const labels = { app: 'idle' };
        await apply(
          deployment('idle', 'default', labels, 2, {
            terminationGracePeriodSeconds: 5,
            containers: [
              { name: 'main', image: IMAGE, imagePullPolicy: 'Never', command: ['node', ...idle] },
            ],
          }),
        );
        const dsLabels = { app: 'idle-host' };
        await apply({
          apiVersion: 'apps/v1',
          kind: 'DaemonSet',
          metadata: { name: 'idle-host', namespace: 'default' },
          spec: {
            selector: { matchLabels: dsLabels },
            // All nodes at once: the rollout itself is what is tested, not its pace.
            updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 3 } },
            template: {
              metadata: { labels: dsLabels },
              spec: {
                hostNetwork: true,
                terminationGracePeriodSeconds: 5,
                containers: [
                  { name: 'main', image: IMAGE, imagePullPolicy: 'Never', command: ['node', ...idle] },
                ],
              },
            },
          },
        });
        await rollout('default', 'deployment/idle');
        await rollout('default', 'daemonset/idle-host');
        const before = [...(await pods('default', 'app=idle')), ...(await pods('default', 'app=idle-host'))];
        t.equal(before.length, 5);
        t.strictSame(
          [...new Set((await pods('default', 'app=idle-host')).map((p) => p.spec.nodeName))].sort(),
          ['node-a', 'node-b', 'node-c'],
        );
        // The runtime image runs as root with NET_ADMIN on every node: the tools the sidecar calls,
        // and no package manager.
        const tools = await c.k([
          'exec',
          '-n',
          'default',
          before[0]!.metadata.name,
          '--',
          'sh',
          '-c',
          'for t in node nft ebtables ip npm npx corepack yarn yarnpkg; do command -v $t || true; done; ls /usr/local/lib/node_modules 2>/dev/null || true',
        ]);
        const found = tools
          .trim()
          .split('\n')
          .map((l) => l.split('/').pop());
        for (const tool of ['node', 'nft', 'ebtables', 'ip'])
          t.ok(found.includes(tool), `${tool} in the image:\n${tools}`);
        for (const tool of ['npm', 'npx', 'corepack', 'yarn', 'yarnpkg'])
          t.ok(!found.includes(tool), `no ${tool} in the runtime image:\n${tools}`);
        await c.k(['rollout', 'restart', '-n', 'default', 'deployment/idle', 'daemonset/idle-host']);
        await rollout('default', 'deployment/idle');
        await rollout('default', 'daemonset/idle-host');
        const old = new Set(before.map((p) => p.metadata.uid));
        await waitFor(
          'only replaced pods, all Running',
          async () => {
            const now = [...(await pods('default', 'app=idle')), ...(await pods('default', 'app=idle-host'))];
            return (
              now.length === 5 && now.every((p) => !old.has(p.metadata.uid) && p.status?.phase === 'Running')
            );
          },
          T,
        );
      }),
  );

  t.test(
    'kubectl drain evicts the Deployment pod, the ReplicaSet re-creates it elsewhere, DaemonSet pods stay',
    async (t) =>
      withLogs(c, async () => {
        const labels = { app: 'drainee' };
        await apply(
          deployment('drainee', 'default', labels, 1, {
            terminationGracePeriodSeconds: 5,
            // Prefer node-c so there is something to evict; nothing forbids the other nodes.
            affinity: {
              nodeAffinity: {
                preferredDuringSchedulingIgnoredDuringExecution: [
                  {
                    weight: 100,
                    preference: {
                      matchExpressions: [
                        { key: 'kubernetes.io/hostname', operator: 'In', values: ['node-c'] },
                      ],
                    },
                  },
                ],
              },
            },
            volumes: [{ name: 'scratch', emptyDir: {} }],
            containers: [
              {
                name: 'main',
                image: LAB_IMAGE,
                imagePullPolicy: 'Never',
                args: idle,
                volumeMounts: [{ name: 'scratch', mountPath: '/scratch' }],
              },
            ],
          }),
        );
        await rollout('default', 'deployment/drainee');
        const [first] = await pods('default', 'app=drainee');
        t.equal(first?.spec.nodeName, 'node-c');
        if (!first) throw new Error('no drainee pod');
        const dsOnC = (await pods('default', 'app=idle-host')).filter((p) => p.spec.nodeName === 'node-c');
        t.equal(dsOnC.length, 1);
        try {
          await c.k(['drain', 'node-c', '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=120s']);
          const moved = await waitFor(
            'the evicted pod re-created on another node and Running',
            async () => {
              const now = await pods('default', 'app=drainee');
              return now.find(
                (p) =>
                  p.metadata.uid !== first.metadata.uid &&
                  p.spec.nodeName !== 'node-c' &&
                  p.status?.phase === 'Running',
              );
            },
            T,
          );
          t.ok(moved.spec.nodeName === 'node-a' || moved.spec.nodeName === 'node-b');
          const after = (await pods('default', 'app=idle-host')).filter((p) => p.spec.nodeName === 'node-c');
          t.strictSame(
            after.map((p) => p.metadata.uid),
            dsOnC.map((p) => p.metadata.uid),
            'the DaemonSet pod on node-c was left in place',
          );
        } finally {
          await c.k(['uncordon', 'node-c']);
        }
      }),
  );

  t.test('the kubelet runs exec and httpGet preStop hooks before SIGTERM', async (t) =>
    withLogs(c, async () => {
      // A hostPath the test can read after the pod is gone; the kubelet shares this mount namespace.
      const out = mkdtempSync(join(c.dir, 'hooks-'));
      const file = '/out/events';
      const recorder = (who: string, http: boolean) =>
        [
          "const fs = require('node:fs');",
          `const log = (m) => fs.appendFileSync('${file}', \`\${process.hrtime.bigint()} ${who} \${m}\\n\`);`,
          "process.on('SIGTERM', () => { log('SIGTERM'); process.exit(0); });",
          http
            ? "require('node:http').createServer((q, r) => { log('httpGet ' + q.url); r.end('ok'); }).listen(8080, () => log('started'));"
            : "log('started');",
          'setInterval(() => {}, 1 << 30);',
        ].join('\n');
      await apply({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'hooks', namespace: 'default' },
        spec: {
          terminationGracePeriodSeconds: 20,
          volumes: [{ name: 'out', hostPath: { path: out, type: 'Directory' } }],
          containers: [
            {
              name: 'http',
              image: LAB_IMAGE,
              imagePullPolicy: 'Never',
              args: ['-e', recorder('http', true)],
              volumeMounts: [{ name: 'out', mountPath: '/out' }],
              lifecycle: { preStop: { httpGet: { path: '/prestop-hook', port: 8080 } } },
            },
            {
              name: 'exec',
              image: LAB_IMAGE,
              imagePullPolicy: 'Never',
              args: ['-e', recorder('exec', false)],
              volumeMounts: [{ name: 'out', mountPath: '/out' }],
              lifecycle: {
                preStop: {
                  exec: {
                    command: [
                      'node',
                      '-e',
                      `require('node:fs').appendFileSync('${file}', process.hrtime.bigint() + ' exec preStop\\n')`,
                    ],
                  },
                },
              },
            },
          ],
        },
      });
      await c.k(['wait', '-n', 'default', '--for=condition=Ready', 'pod/hooks', '--timeout=120s']);
      const lines = () => {
        try {
          return readFileSync(join(out, 'events'), 'utf8').trim().split('\n');
        } catch {
          return [];
        }
      };
      await waitFor(
        'both containers started',
        async () => lines().filter((l) => l.endsWith('started')).length === 2,
        T,
      );
      await c.k(['delete', 'pod', '-n', 'default', 'hooks', '--wait=true', '--timeout=120s']);
      const events = lines().map((l) => l.split(' ').slice(1).join(' '));
      const at = (e: string) => {
        const i = events.indexOf(e);
        t.ok(i >= 0, `${e} observed; saw ${events.join(' | ')}`);
        return i;
      };
      // The path as given (kubelets before 1.26 prepended a slash: kubernetes#86139).
      t.ok(at('http httpGet /prestop-hook') < at('http SIGTERM'), events.join(' | '));
      t.ok(at('exec preStop') < at('exec SIGTERM'), events.join(' | '));
      rmSync(out, { recursive: true, force: true });
    }),
  );

  t.test('the webhook from manifests/ injects a Ready sidecar that reaches the API in-cluster', async (t) =>
    withLogs(c, async () => {
      await installed(c);
      const labels = { app: 'metallb', component: 'speaker' };
      await apply({
        apiVersion: 'apps/v1',
        kind: 'DaemonSet',
        metadata: { name: 'speaker', namespace: 'metallb-system', labels },
        spec: {
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: {
              serviceAccountName: 'speaker',
              hostNetwork: true,
              terminationGracePeriodSeconds: 5,
              containers: [
                {
                  name: 'speaker',
                  image: LAB_IMAGE,
                  imagePullPolicy: 'Never',
                  args: idle,
                  ports: [{ name: 'memberlist-tcp', containerPort: 7946, protocol: 'TCP' }],
                  securityContext: { capabilities: { add: ['NET_RAW'] } },
                },
              ],
            },
          },
        },
      });
      await rollout('metallb-system', 'daemonset/speaker');
      const plain = await pods('metallb-system', 'component=speaker');
      t.ok(
        plain.every((p) => p.spec.containers.length === 1),
        'not injected before the label',
      );
      await c.k(['label', 'namespace', 'metallb-system', 'drainguard.io/inject=enabled']);
      await c.k(['rollout', 'restart', '-n', 'metallb-system', 'daemonset/speaker']);
      await rollout('metallb-system', 'daemonset/speaker');
      const injected = await waitFor(
        'three speaker pods, each with a Running and Ready sidecar',
        async () => {
          const now = (await pods('metallb-system', 'component=speaker')).filter(
            (p) => !plain.some((o) => o.metadata.uid === p.metadata.uid),
          );
          const ok = now.filter((p) => {
            const s = sidecarStatus(p);
            return s?.ready && s.state?.running;
          });
          return ok.length === 3 ? ok : undefined;
        },
        T,
      );
      // Every kubelet here has native sidecars (1.29+): `auto` mode chose one, a restartable init
      // container, and the injection record says so.
      for (const p of injected) {
        t.equal(sidecarMode(p), 'native', `${p.metadata.name}: the sidecar is a restartable init container`);
        const record = JSON.parse(p.metadata.annotations?.[ANNOTATIONS.injected] ?? '{}') as {
          mode?: string;
        };
        t.equal(record.mode, 'native', `${p.metadata.name}: drainguard.io/status records mode native`);
      }
      for (const p of injected) {
        const node = c.bed.node(p.spec.nodeName as string);
        // hostNetwork: the sidecar listens on the node's loopback only.
        const metrics = await waitFor(
          `${p.spec.nodeName}: sidecar metrics show the API view synced`,
          async () => {
            const r = await node.exec([
              process.execPath,
              '-e',
              "fetch('http://127.0.0.1:7480/metrics').then(r => r.text()).then(t => process.stdout.write(t))",
            ]);
            return r.code === 0 && /^drainguard_api_view_synced 1$/m.test(r.stdout) ? r.stdout : undefined;
          },
          T,
        );
        t.match(metrics, /drainguard_l2_phase\{phase="idle"\} 1/);
      }
      // The sidecar's own log says it ran with the pod's service account, in-cluster.
      const logs = await c.k([
        'logs',
        '-n',
        'metallb-system',
        injected[0]!.metadata.name,
        '-c',
        'drainguard',
      ]);
      t.notMatch(logs, /"level":50/, 'no error in the sidecar log');
      mkdirSync(join(c.dir, 'done'), { recursive: true });
    }),
  );

  t.test(
    'a rollout of the two webhook replicas under steady admissions fails none (readiness off first, served through the drain period)',
    async (t) =>
      withLogs(c, async () => {
        await installed(c);
        await c.k(['create', 'namespace', 'admit-load']);
        await c.k(['label', 'namespace', 'admit-load', 'drainguard.io/inject=enabled']);
        // failurePolicy Fail: an admission that reaches no webhook endpoint is a failed pod creation.
        // Server-side dry runs are admitted like real creations (the webhook has no side effects).
        const pod = JSON.stringify({
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { generateName: 'admit-', namespace: 'admit-load' },
          spec: { containers: [{ name: 'main', image: LAB_IMAGE, args: idle }] },
        });
        const before = await pods('drainguard-system', 'app.kubernetes.io/component=webhook');
        t.equal(before.length, 2, 'two webhook replicas');
        let stop = false;
        let ok = 0;
        const failed: string[] = [];
        const load = (async () => {
          while (!stop) {
            const r = await c.kubectl(['create', '--dry-run=server', '-o', 'name', '-f', '-'], {
              input: pod,
            });
            if (r.code === 0) ok++;
            else failed.push(r.stderr.trim());
          }
        })();
        try {
          await waitFor('admissions flowing', () => ok >= 5, T);
          await c.k(['rollout', 'restart', '-n', 'drainguard-system', 'deployment/drainguard-webhook']);
          await rollout('drainguard-system', 'deployment/drainguard-webhook');
          await waitFor(
            'the old replicas gone',
            async () =>
              (await pods('drainguard-system', 'app.kubernetes.io/component=webhook')).every(
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
        t.strictSame(failed, [], `${failed.length} of ${ok + failed.length} admissions failed`);
        process.stdout.write(`# webhook rollout: ${ok} admissions, 0 failed\n`);
      }),
  );
});
