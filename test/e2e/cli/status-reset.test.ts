// `drainguard status` and `drainguard reset` as a user runs them: the CLI process against a real
// API server, and the nft part against real tables in a network namespace.
import t from 'tap';
import { type ControlPlane, sharedControlPlane } from '../../../lab/bed/control-plane.ts';
import { createNamespace } from '../../../lab/bed/netns.ts';
import { START_DEADLINE_MS, sh } from '../../../lab/bed/proc.ts';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import { EventRecorder } from '../../../shared/kube/events.ts';
import type { KubeObject, Node, Pod } from '../../../shared/kube/types.ts';
import { microTime } from '../../../shared/kube/types.ts';
import { createLogger } from '../../../shared/log.ts';
import {
  ANNOTATIONS,
  EXCLUDE_LABEL,
  FENCE_TABLE,
  L2_STATE_ANNOTATION,
  LABEL_OWNED_ANNOTATION,
  SIDECAR_NAME,
} from '../../../shared/names.ts';
import { apiFenceTableIn, fenceTablesIn } from '../../../shared/net/fence-tables.ts';
import { renderApiFence } from '../../../sidecar/api-fence/fence.ts';
import { renderFence } from '../../../sidecar/l2/fence.ts';
import { LEASE_EVENT_REASONS } from '../../../sidecar/lease/core.ts';
import { fencedL2Status } from '../../unit/cli/l2-state-fixture.ts';

const CLI = new URL('../../../cli/drainguard.ts', import.meta.url).pathname;
const CRD = new URL('../../../lab/sim/speaker/crds/servicel2status.yaml', import.meta.url).pathname;
let cp: ControlPlane;
let client: KubeClient;

// How fast the CLI starts is not what these tests measure (under load it took over 30 s).
const cli = (args: string[]) =>
  sh([process.execPath, CLI, ...args, '--kubeconfig', cp.kubeconfigPath], { timeoutMs: START_DEADLINE_MS });

const l2Status = JSON.stringify(fencedL2Status({ to: 'st-b' }));

async function makeNode(name: string, labels: Record<string, string>, annotations: Record<string, string>) {
  await client.create('/api/v1/nodes', {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels, annotations },
  });
}

t.before(async () => {
  cp = await sharedControlPlane();
  client = cp.client();
});
t.teardown(() => client.close());

t.test(
  'status: nodes and guarded Leases, table and json, from what the sidecar and webhook publish',
  async (t) => {
    await makeNode(
      'st-a',
      { [EXCLUDE_LABEL]: '' },
      { [LABEL_OWNED_ANNOTATION]: 'true', [L2_STATE_ANNOTATION]: l2Status },
    );
    await client.patch('/api/v1/nodes/st-a', { spec: { unschedulable: true } }, 'merge');
    await makeNode('st-b', { [EXCLUDE_LABEL]: 'true' }, {});
    await client.create('/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'st-site' },
    });
    const pod = await client.create<Pod>('/api/v1/namespaces/st-site/pods', {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: 'router-1',
        namespace: 'st-site',
        annotations: {
          [ANNOTATIONS.injected]: JSON.stringify({ profile: 'skupper-router', features: ['lease-handover'] }),
        },
      },
      spec: {
        nodeName: 'st-a',
        automountServiceAccountToken: false,
        containers: [
          { name: 'kube-adaptor', image: 'x' },
          {
            name: SIDECAR_NAME,
            image: 'drainguard',
            env: [
              { name: 'DRAINGUARD_PROFILE', value: 'skupper-router' },
              { name: 'DRAINGUARD_FEATURES', value: 'lease-handover' },
            ],
          },
        ],
      },
    });
    const renew = microTime(Date.now());
    await client.create('/apis/coordination.k8s.io/v1/namespaces/st-site/leases', {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'skupper-site-leader', namespace: 'st-site' },
      spec: { holderIdentity: 'router-2', leaseDurationSeconds: 15, renewTime: renew, acquireTime: renew },
    });
    // The Event as the sidecar records it (same recorder, same reason constant).
    const rec = new EventRecorder(client, 'drainguard', 'st-a', createLogger('test', 'error'));
    await rec.record(
      { kind: 'Pod', name: 'router-1', namespace: 'st-site', uid: pod.metadata?.uid ?? '' },
      'Normal',
      LEASE_EVENT_REASONS.handedOver,
      'Lease st-site/skupper-site-leader handed to router-2 in 0.3 s',
    );

    const json = await cli(['status', '-o', 'json']);
    t.equal(json.code, 0, json.stderr);
    const r = JSON.parse(json.stdout) as {
      nodes: {
        node: string;
        draining: string | null;
        fence: string;
        status?: { vips: string[] };
        excludeLabel: string;
        injectedPods: string[];
      }[];
      leases: {
        lease: string;
        holder: string;
        renewTime: string;
        lastHandover: { reason: string; message: string } | null;
      }[];
    };
    const a = r.nodes.find((n) => n.node === 'st-a');
    const b = r.nodes.find((n) => n.node === 'st-b');
    t.equal(a?.draining, 'cordoned');
    t.equal(a?.fence, 'installed');
    t.strictSame(a?.status?.vips, ['198.51.100.100']);
    t.equal(a?.excludeLabel, 'drainguard');
    t.strictSame(a?.injectedPods, ['st-site/router-1']);
    t.equal(b?.draining, null);
    t.equal(b?.excludeLabel, 'pre-existing');
    const l = r.leases.find((x) => x.lease === 'st-site/skupper-site-leader');
    t.equal(l?.holder, 'router-2');
    t.equal(l?.renewTime, renew);
    t.equal(l?.lastHandover?.reason, LEASE_EVENT_REASONS.handedOver);

    const table = await cli(['status']);
    t.equal(table.code, 0, table.stderr);
    t.match(table.stdout, /st-a\s+yes\s+drainguard\s+fenced\s+\S+\s+198\.51\.100\.100\s+st-b\s+eth0/);
    t.match(table.stdout, /st-a\s+cordoned\s+-\s+st-site\/router-1/);
    t.match(
      table.stdout,
      /st-site\/skupper-site-leader\s+router-2\s+\S+\s+\S+ LeaseHandedOver: Lease st-site/,
    );

    const one = await cli(['status', '--json', 'st-b']);
    t.equal(one.code, 0, one.stderr);
    t.strictSame(
      (JSON.parse(one.stdout) as { nodes: { node: string }[] }).nodes.map((n) => n.node),
      ['st-b'],
    );

    const bad = await cli(['status', '-o', 'yaml']);
    t.equal(bad.code, 2);
    t.match(bad.stderr, /accepted values are table, json/);
  },
);

t.test(
  'status: VIPs a node announces, from MetalLB ServiceL2Status and the Service (once the CRD exists)',
  async (t) => {
    const crd = await cp.kubectl(['apply', '--validate=false', '-f', CRD]);
    t.equal(crd.code, 0, crd.stderr);
    await waitFor(
      'ServiceL2Status served',
      async () => (await cp.kubectl(['get', 'servicel2statuses.metallb.io', '-A'])).code === 0,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    await makeNode('an-b', {}, {});
    for (const ns of ['an-web', 'an-metallb'])
      await client.create('/api/v1/namespaces', {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: ns },
      });
    const svc = await client.create<KubeObject>('/api/v1/namespaces/an-web/services', {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'www', namespace: 'an-web' },
      spec: { type: 'LoadBalancer', ports: [{ port: 80 }] },
    });
    await client.replace('/api/v1/namespaces/an-web/services/www/status', {
      ...svc,
      status: { loadBalancer: { ingress: [{ ip: '198.51.100.100' }] } },
    });
    // As MetalLB's speaker writes it: empty spec, the announcing node in status.
    const l2 = await client.create<KubeObject>(
      '/apis/metallb.io/v1beta1/namespaces/an-metallb/servicel2statuses',
      {
        apiVersion: 'metallb.io/v1beta1',
        kind: 'ServiceL2Status',
        metadata: { name: 'l2-www', namespace: 'an-metallb' },
        spec: {},
      },
    );
    await client.replace('/apis/metallb.io/v1beta1/namespaces/an-metallb/servicel2statuses/l2-www/status', {
      ...l2,
      status: {
        node: 'an-b',
        serviceName: 'www',
        serviceNamespace: 'an-web',
        interfaces: [{ name: 'eth0' }],
      },
    });
    const json = await cli(['status', '-o', 'json']);
    t.equal(json.code, 0, json.stderr);
    const r = JSON.parse(json.stdout) as { nodes: { node: string; announces: string[] }[] };
    t.strictSame(r.nodes.find((n) => n.node === 'an-b')?.announces, ['198.51.100.100']);
    const table = await cli(['status']);
    t.match(table.stdout, /an-b\s+no\s+198\.51\.100\.100\s/);
  },
);

t.test('reset: dry run changes nothing; --yes removes only what drainguard owns', async (t) => {
  await makeNode(
    'rs-a',
    { [EXCLUDE_LABEL]: '', keep: 'me' },
    { [LABEL_OWNED_ANNOTATION]: 'true', [L2_STATE_ANNOTATION]: l2Status, 'other.io/x': 'keep' },
  );
  await makeNode('rs-cp', { [EXCLUDE_LABEL]: '' }, { [L2_STATE_ANNOTATION]: l2Status });
  const before = await client.get<Node>('/api/v1/nodes/rs-a');

  const dry = await cli(['reset', '--node', 'rs-a']);
  t.equal(dry.code, 0, dry.stderr);
  t.match(dry.stdout, /dry run/);
  t.match(dry.stdout, new RegExp(`would remove label ${EXCLUDE_LABEL}`));
  const unchanged = await client.get<Node>('/api/v1/nodes/rs-a');
  t.equal(unchanged.metadata?.resourceVersion, before.metadata?.resourceVersion);

  const yes = await cli(['reset', '--node', 'rs-a', '--yes']);
  t.equal(yes.code, 0, yes.stderr);
  const a = await client.get<Node>('/api/v1/nodes/rs-a');
  t.equal(a.metadata?.labels?.[EXCLUDE_LABEL], undefined);
  t.equal(a.metadata?.labels?.keep, 'me');
  t.strictSame(a.metadata?.annotations, { 'other.io/x': 'keep' });

  // A label drainguard did not add (kubeadm on control-plane nodes) survives --all.
  const all = await cli(['reset', '--all', '--yes']);
  t.equal(all.code, 0, all.stderr);
  const cpNode = await client.get<Node>('/api/v1/nodes/rs-cp');
  t.equal(cpNode.metadata?.labels?.[EXCLUDE_LABEL], '');
  t.equal(cpNode.metadata?.annotations?.[L2_STATE_ANNOTATION], undefined);
  t.match(all.stdout, /node\/rs-cp: keeping label/);

  for (const [args, msg] of [
    [['reset'], /--node NAME, or use --all/],
    [['reset', '--all', '--local'], /--local acts on this machine only/],
    [['reset', '--all', '--node', 'x'], /exclude each other/],
  ] as const) {
    const r = await cli([...args]);
    t.equal(r.code, 2);
    t.match(r.stderr, msg);
  }
  const missing = await cli(['reset', '--node', 'no-such-node', '--yes']);
  t.equal(missing.code, 1);
  t.match(missing.stderr, /404|not found/i);
});

t.test(
  'reset --local removes the drainguard nft tables in the node namespace (and only with --yes)',
  async (t) => {
    const ns = await createNamespace('reset');
    try {
      await ns.run(['ip', 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth0p']);
      // No dummy module in this kernel: a veth pair gives the fence a device with an egress hook.
      await ns.run(['ip', 'link', 'set', 'eth0', 'up']);
      // The sidecar's own fence (with the memberlist cut, so both tables exist), plus a foreign table.
      await ns.run(['nft', '-f', '-'], {
        input: renderFence({
          vips4: ['198.51.100.100'],
          vips6: [],
          interfaces: ['eth0'],
          memberlistPorts: [7946],
        }),
      });
      await ns.run(['nft', '-f', '-'], { input: renderApiFence([{ address: '198.51.100.1', port: 6443 }]) });
      await ns.run(['nft', 'add', 'table', 'inet', 'someone-else']);
      const tables = async () => fenceTablesIn(await ns.run(['nft', '-j', 'list', 'tables']));
      const apiFence = async () => apiFenceTableIn(await ns.run(['nft', '-j', 'list', 'tables']));
      t.strictSame(await tables(), ['inet', 'netdev']);
      await makeNode('rs-local', {}, { [L2_STATE_ANNOTATION]: l2Status });

      const dry = await cli(['reset', '--local', '--node', 'rs-local', '--netns', ns.ns]);
      t.equal(dry.code, 0, dry.stderr);
      t.match(dry.stdout, new RegExp(`would remove nft table netdev ${FENCE_TABLE}`));
      t.match(dry.stdout, /would remove nft table inet drainguard-api/);
      t.strictSame(await tables(), ['inet', 'netdev']);
      t.ok(await apiFence());

      const yes = await cli(['reset', '--local', '--node', 'rs-local', '--netns', ns.ns, '--yes']);
      t.equal(yes.code, 0, yes.stderr);
      t.match(yes.stdout, new RegExp(`removed nft table inet ${FENCE_TABLE}`));
      t.strictSame(await tables(), []);
      t.notOk(await apiFence(), "the stale API server's fence is removed too");
      t.match(await ns.run(['nft', 'list', 'tables']), /someone-else/);
      const n = await client.get<Node>('/api/v1/nodes/rs-local');
      t.equal(n.metadata?.annotations?.[L2_STATE_ANNOTATION], undefined);

      const again = await cli(['reset', '--local', '--node', 'rs-local', '--netns', ns.ns, '--yes']);
      t.equal(again.code, 0, again.stderr);
      t.match(again.stdout, /no drainguard nft table/);
    } finally {
      await ns.destroy();
    }
  },
);
