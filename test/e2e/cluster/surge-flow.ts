// A surge rollout under the `node-name` identity on real kubelets (issue 24's Lease split brain):
// kube-vip elects under its node's name, so while a rollout with maxSurge runs the new pod beside
// the old one on a node, both renew one identity. The old pod's sidecar must leave the Lease to its
// sibling; handing it to the pod on another node would make two leaders for up to RenewDeadline.
// Kubernetes 1.20 (the lab) has no DaemonSet maxSurge (alpha in 1.21), so each node runs a
// one-replica Deployment pinned to it, RollingUpdate maxSurge 1 / maxUnavailable 0: per node the
// same surge. The kube-vip container is the client-go candidate simulator under $LEASE_IDENTITY.
import t from 'tap';
import type { Cluster } from '../../../lab/cluster/cluster.ts';
import { followEvents } from '../../../lab/cluster/logs.ts';
import { injectedAndReady, type Pod, podsOf } from '../../../lab/cluster/pods.ts';
import { waitFor } from '../../../shared/clock.ts';
import { withLogs } from './logs.ts';
import { cluster, installed } from './shared.ts';

const NS = 'kube-vip';
const LEASE = 'plndr-cp-lock';
const SELECTOR = 'app=kube-vip';
const T = { timeoutMs: 180_000, intervalMs: 250 };
/** skupper's (the simulator's) timings: RenewDeadline 10 s, RetryPeriod 2 s. */
const RENEW_DEADLINE_MS = 10_000;
const RETRY_PERIOD_MS = 2_000;

interface Ev {
  ev: string;
  identity: string;
  t: number;
}

let c: Cluster;
const k = (args: string[], input?: string) => c.k(args, input === undefined ? {} : { input });
const vipPods = () => podsOf(c, NS, SELECTOR);
const lease = async () =>
  JSON.parse(await k(['get', 'lease', '-n', NS, LEASE, '-o', 'json'])) as {
    spec?: { holderIdentity?: string; renewTime?: string };
  };
const holder = async () => (await lease()).spec?.holderIdentity;
const logged = (fn: () => Promise<void>) => withLogs(c, fn, { namespace: NS, pods: vipPods });

/** kube-vip as one pinned Deployment per node: the drainguard `lease` profile, identity node-name. */
function vipDeployment(node: string): object {
  const labels = { app: 'kube-vip', 'lab.drainguard.io/node': node };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: `kube-vip-${node}`, namespace: NS },
    spec: {
      replicas: 1,
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      selector: { matchLabels: labels },
      template: {
        metadata: {
          labels,
          annotations: {
            'drainguard.io/leases': LEASE,
            'drainguard.io/leader-container': 'kube-vip',
            'drainguard.io/identity-scheme': 'node-name',
            'drainguard.io/successor-selector': SELECTOR,
          },
        },
        spec: {
          serviceAccountName: 'kube-vip',
          nodeSelector: { 'kubernetes.io/hostname': node },
          terminationGracePeriodSeconds: 30,
          containers: [
            {
              name: 'kube-vip',
              image: 'drainguard-lab:dev',
              imagePullPolicy: 'Never',
              args: ['lab/sim/lease-candidate-pod.ts', LEASE],
              env: [
                { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                { name: 'LEASE_IDENTITY', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
              ],
            },
          ],
        },
      },
    },
  };
}

async function setUp(): Promise<void> {
  c = await cluster();
  await installed(c);
  await k(['create', 'namespace', NS]);
  await k(['create', 'serviceaccount', '-n', NS, 'kube-vip']);
  // kube-vip's own grant, and the sidecar's as the README's per-site Role has it (writes to the
  // one Lease only), bound to the same account.
  await k(['create', 'role', '-n', NS, 'kube-vip', '--verb=get,create,update', '--resource=leases']);
  await k([
    'create',
    'rolebinding',
    '-n',
    NS,
    'kube-vip',
    '--role=kube-vip',
    `--serviceaccount=${NS}:kube-vip`,
  ]);
  await k(
    ['apply', '-n', NS, '-f', '-'],
    JSON.stringify({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'drainguard-sidecar-lease' },
      rules: [
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch'] },
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          resourceNames: [LEASE],
          verbs: ['update'],
        },
        { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: [''], resources: ['events'], verbs: ['create'] },
      ],
    }),
  );
  await k([
    'create',
    'rolebinding',
    '-n',
    NS,
    'drainguard-sidecar-lease',
    '--role=drainguard-sidecar-lease',
    `--serviceaccount=${NS}:kube-vip`,
  ]);
  await k([
    'create',
    'clusterrolebinding',
    `drainguard-sidecar-nodes-${NS}`,
    '--clusterrole=drainguard-sidecar-nodes',
    `--serviceaccount=${NS}:kube-vip`,
  ]);
  await k(['label', 'namespace', NS, 'drainguard.io/inject=enabled']);
}

t.test('surge rollout under the node-name identity on real kubelets', { timeout: 900_000 }, async (t) => {
  t.before(setUp);
  // The next suite schedules onto every node: nothing of this one may stay.
  t.teardown(async () => {
    await c?.kubectl(['delete', 'namespace', NS, '--wait=true', '--timeout=120s']);
    await c?.kubectl(['delete', 'clusterrolebinding', `drainguard-sidecar-nodes-${NS}`]);
  });

  t.test(
    "the old pod's sidecar leaves the Lease to the new pod on its node; the pod on another node never leads",
    async (t) =>
      logged(async () => {
        const [a, b] = c.nodes.map((n) => n.name);
        if (!a || !b) throw new Error('the lab cluster has fewer than two nodes');
        // Node a's kube-vip first, so it holds the Lease under its node's name; then node b's.
        await k(['apply', '-f', '-'], JSON.stringify(vipDeployment(a)));
        await waitFor('the Lease held under node a', async () => (await holder().catch(() => '')) === a, T);
        await k(['apply', '-f', '-'], JSON.stringify(vipDeployment(b)));
        const ready = (node: string) => async () =>
          (await vipPods()).find((p) => p.spec.nodeName === node && injectedAndReady(p, 2));
        const old = await waitFor('an injected, Ready kube-vip pod on node a', ready(a), T);
        const other = await waitFor('an injected, Ready kube-vip pod on node b', ready(b), T);
        const oldSidecar = followEvents(c, NS, old.metadata.name, 'drainguard');
        const otherLog = followEvents<Ev>(c, NS, other.metadata.name, 'kube-vip');
        try {
          await waitFor(
            'log streams open',
            () => oldSidecar.lines.length > 0 && otherLog.lines.length > 0,
            T,
          );
          // The surge: a new pod on node a beside the old one; the old one goes once it is Ready.
          await k(['rollout', 'restart', '-n', NS, `deployment/kube-vip-${a}`]);
          // Its log can be followed once it runs (kubectl logs -f from the start).
          const surge = await waitFor(
            'the new pod on node a, injected and Ready',
            async () =>
              (await vipPods()).find(
                (p: Pod) =>
                  p.spec.nodeName === a && p.metadata.uid !== old.metadata.uid && injectedAndReady(p, 2),
              ),
            T,
          );
          const surgeLog = followEvents<Ev>(c, NS, surge.metadata.name, 'kube-vip');
          try {
            await waitFor(
              'the new pod on node a leads under the shared identity',
              () => surgeLog.events.some((e) => e.ev === 'leading'),
              T,
            );
            await k(['rollout', 'status', '-n', NS, `deployment/kube-vip-${a}`, '--timeout=180s']);
            const finished = await waitFor(
              "the old pod's sidecar finished its handover",
              () => oldSidecar.lines.find((l) => l.includes('Lease handover finished')),
              T,
            );
            t.match(
              finished,
              /"outcome":"identity-shared"/,
              `left to the pod sharing the identity:\n${oldSidecar.lines.join('\n')}`,
            );
            await waitFor(
              'the old pod gone',
              async () => !(await vipPods()).some((p) => p.metadata.uid === old.metadata.uid),
              T,
            );
            // A displaced leader notices within RenewDeadline + RetryPeriod, and node b's
            // candidate would have led by then had the Lease been handed to it: watched until
            // the Lease has been renewed past that window.
            const until = Date.now() + RENEW_DEADLINE_MS + 2 * RETRY_PERIOD_MS;
            await waitFor(
              'the Lease renewed past the window a displaced leader needs',
              async () => Date.parse((await lease()).spec?.renewTime ?? '') >= until,
              T,
            );
            t.equal(await holder(), a, 'the Lease is still held under node a');
            t.notOk(
              surgeLog.events.some((e) => e.ev === 'stopped-leading'),
              'the new pod on node a leads on',
            );
            t.strictSame(
              otherLog.events.filter((e) => e.ev === 'leading'),
              [],
              'the pod on node b never led: never two identities leading at once',
            );
            const events = JSON.parse(
              await k([
                'get',
                'events',
                '-n',
                NS,
                '--field-selector=reason=LeaseIdentityShared',
                '-o',
                'json',
              ]),
            ) as { items: { message: string; involvedObject: { name: string } }[] };
            t.ok(
              events.items.some(
                (e) => e.involvedObject.name === old.metadata.name && e.message.includes(surge.metadata.name),
              ),
              `a LeaseIdentityShared Event on the old pod names the new one: ${JSON.stringify(events.items.map((e) => e.message))}`,
            );
          } finally {
            surgeLog.proc.kill();
          }
        } finally {
          oldSidecar.proc.kill();
          otherLog.proc.kill();
        }
      }),
  );
});
