// The skupper report's two reproductions, against the real API server, with the sidecar
// running as a service account: API priority and fairness rejecting Lease requests (429),
// and the Lease verbs removed from its Role (403). Either way the sidecar keeps running and
// serving health, backs off, and finishes the handover once the API lets it.
import t, { type Test } from 'tap';
import { type ControlPlane, startControlPlane } from '../../../lab/bed/control-plane.ts';
import { LeaseScene, type SidecarProc } from '../../../lab/bed/lease-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import { isApiError } from '../../../shared/kube/api-error.ts';
import { KubeClient } from '../../../shared/kube/client.ts';
import { handoverResult, startTwoRouters } from './routers.ts';
import { startLeaseWebhook } from './webhook.ts';

const sa = (ns: string) => `system:serviceaccount:${ns}:drainguard`;
const saGroups = (ns: string) => ['system:serviceaccounts', `system:serviceaccounts:${ns}`];

let cp: ControlPlane;
t.before(async () => {
  cp = await startControlPlane({
    users: [
      { name: sa('lease-rbac'), groups: saGroups('lease-rbac') },
      { name: sa('lease-apf'), groups: saGroups('lease-apf') },
      { name: 'seat-holder' },
    ],
    // 30 seats in all: a level with one share gets exactly one (ceil(30 * 1 / 206)).
    extraApiServerArgs: ['--max-requests-inflight=20', '--max-mutating-requests-inflight=10'],
  });
});
t.teardown(async () => {
  await cp?.stop();
});

const LEASE_RULE = {
  apiGroups: ['coordination.k8s.io'],
  resources: ['leases'],
  verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'],
};

function role(withLeases: boolean) {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'drainguard' },
    rules: [
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
      ...(withLeases ? [LEASE_RULE] : []),
    ],
  };
}

/** The sidecar's RBAC, as the manifests grant it (leases optional, to take them away). */
async function grant(w: LeaseScene, withLeases: boolean): Promise<void> {
  const c = w.client;
  const ns = w.ns;
  await c.create(`/api/v1/namespaces/${ns}/serviceaccounts`, { metadata: { name: 'drainguard' } });
  await c.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, role(withLeases));
  const subjects = [{ kind: 'ServiceAccount', name: 'drainguard', namespace: ns }];
  await c.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
    metadata: { name: 'drainguard' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'drainguard' },
    subjects,
  });
  await c.create('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
    metadata: { name: `drainguard-${ns}` },
    rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] }],
  });
  await c.create('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    metadata: { name: `drainguard-${ns}` },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `drainguard-${ns}` },
    subjects,
  });
}

async function setLeaseVerbs(w: LeaseScene, on: boolean): Promise<void> {
  const path = `/apis/rbac.authorization.k8s.io/v1/namespaces/${w.ns}/roles/drainguard`;
  const cur = await w.client.get<{ metadata: object }>(path);
  await w.client.replace(path, { ...role(on), metadata: cur.metadata });
}

async function assertHealthy(t: Test, sc: SidecarProc): Promise<void> {
  t.equal(sc.exitCode, undefined, `sidecar exited:\n${sc.dump()}`);
  t.equal((await sc.http('/healthz')).status, 200);
  t.equal((await sc.http('/readyz')).status, 200);
}

const backedOff = (sc: SidecarProc, code: number) =>
  sc.find((l) => l.msg === 'API call failed; backing off' && l.code === code);

t.test(
  'Lease verbs removed from the Role: the sidecar keeps running and healthy, and recovers',
  async (t) => {
    const w = await LeaseScene.create(cp, { nodes: ['a', 'b'] }, 'lease-rbac');
    try {
      await grant(w, false);
      const env = { DRAINGUARD_HANDOVER_BUDGET_SECONDS: '90' };
      const sidecarKubeconfig = cp.userKubeconfig(sa(w.ns));
      await w.addPod({ name: 'router-a', node: 'a', sidecar: env, sidecarKubeconfig });
      await w.waitLeading('router-a');
      await w.addPod({ name: 'router-b', node: 'b', sidecar: env, sidecarKubeconfig });
      const a = w.pod('router-a').sidecar!;
      // Started without the right to read Leases: forbidden, retried, never fatal.
      await waitFor(
        '403s counted',
        async () => ((await a.metric(/^drainguard_api_errors_total\{code="403"\}/)) ?? 0) > 0,
        {
          timeoutMs: 20_000,
          intervalMs: 200,
        },
      );
      await assertHealthy(t, a);
      t.equal(await a.metric(/^drainguard_lease_synced\{/), 0);
      // A refusal is a configuration error, not an outage: "API down" (which arms the L2 fail-safe)
      // stays off, and the log says what to fix. Read after a retried 403, the last API result.
      await waitFor(
        'the Lease read refused twice',
        async () => ((await a.metric(/^drainguard_api_errors_total\{code="403"\}/)) ?? 0) >= 2,
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      t.equal(await a.metric(/^drainguard_api_view_synced /), 1, 'a 403 does not count as API down');
      t.ok(
        a.find(
          (l) => l.msg === 'API refused a request: a configuration error, not an outage' && l.code === 403,
        ),
        'the refusal logged as a configuration error',
      );
      await setLeaseVerbs(w, true);
      await w.waitSidecarsReady(40_000);
      // Taken away again during the handover: the sidecar backs off until it is restored.
      await setLeaseVerbs(w, false);
      await w.deletePod('router-a');
      await waitFor('handover backing off on 403', () => backedOff(a, 403), { timeoutMs: 20_000 });
      await assertHealthy(t, a);
      await assertHealthy(t, w.pod('router-b').sidecar!);
      t.equal(w.pod('router-b').sim.leading, false);
      await setLeaseVerbs(w, true);
      await waitFor('router-b leading', () => w.pod('router-b').sim.leading, { timeoutMs: 30_000 });
      t.equal(await a.exited, 0);
      t.equal(handoverResult(a).outcome, 'handed-over', a.dump());
      t.strictSame(w.splitBrain(), []);
    } finally {
      await w.cleanup();
    }
  },
);

t.test(
  'API priority and fairness rejects Lease requests (429): backs off, stays healthy, hands over after',
  async (t) => {
    const w = await LeaseScene.create(cp, { nodes: ['a', 'b'] }, 'lease-apf');
    const holders: Promise<unknown>[] = [];
    let release!: () => void;
    const released = new Promise<void>((r) => {
      release = r;
    });
    const hook = await startLeaseWebhook(w.client, w.ns, async (r) => {
      // Hold the seat-holder's writes inside admission: each keeps its seat in the level.
      if (r.userInfo.username === 'seat-holder')
        await Promise.race([released, new Promise((x) => setTimeout(x, 25_000))]);
      return { allowed: true };
    });
    const fc = '/apis/flowcontrol.apiserver.k8s.io/v1';
    const seatClient = new KubeClient(cp.userTarget('seat-holder'));
    const saClient = new KubeClient(cp.userTarget(sa('lease-apf')));
    try {
      await grant(w, true);
      await w.client.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${w.ns}/rolebindings`, {
        metadata: { name: 'seat-holder' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'drainguard' },
        subjects: [{ kind: 'User', name: 'seat-holder', apiGroup: 'rbac.authorization.k8s.io' }],
      });
      const env = { DRAINGUARD_HANDOVER_BUDGET_SECONDS: '90' };
      const sidecarKubeconfig = cp.userKubeconfig(sa(w.ns));
      await w.addPod({ name: 'router-a', node: 'a', sidecar: env, sidecarKubeconfig });
      await w.waitLeading('router-a');
      await w.addPod({ name: 'router-b', node: 'b', sidecar: env, sidecarKubeconfig });
      await w.waitSidecarsReady();
      const seatLease = `/apis/coordination.k8s.io/v1/namespaces/${w.ns}/leases/seat`;
      await w.client.create(`/apis/coordination.k8s.io/v1/namespaces/${w.ns}/leases`, {
        metadata: { name: 'seat' },
        spec: { holderIdentity: 'nobody' },
      });
      await w.client.create(`${fc}/prioritylevelconfigurations`, {
        metadata: { name: 'lease-starved' },
        spec: {
          type: 'Limited',
          // One share, and no borrowing of other levels' idle seats (API priority and fairness v1,
          // 1.29): the level's seats stay the one or two the share gives.
          limited: {
            nominalConcurrencyShares: 1,
            borrowingLimitPercent: 0,
            limitResponse: { type: 'Reject' },
          },
        },
      });
      await w.client.create(`${fc}/flowschemas`, {
        metadata: { name: 'lease-starved' },
        spec: {
          priorityLevelConfiguration: { name: 'lease-starved' },
          matchingPrecedence: 100,
          distinguisherMethod: { type: 'ByUser' },
          rules: [
            {
              subjects: [
                { kind: 'ServiceAccount', serviceAccount: { name: 'drainguard', namespace: w.ns } },
                { kind: 'User', user: { name: 'seat-holder' } },
              ],
              resourceRules: [
                {
                  verbs: ['*'],
                  apiGroups: ['coordination.k8s.io'],
                  resources: ['leases'],
                  namespaces: [w.ns],
                },
              ],
            },
          ],
        },
      });
      // Take every seat of the level on purpose, so rejections are certain, not luck.
      const seat = await w.client.get<object>(seatLease);
      const hold = () => seatClient.replace(seatLease, seat, { timeoutMs: 40_000 }).catch((e: unknown) => e);
      await waitFor(
        'Lease requests of the service account rejected with 429',
        async () => {
          if (holders.length < 6) holders.push(hold(), hold());
          try {
            await saClient.get(`/apis/coordination.k8s.io/v1/namespaces/${w.ns}/leases/${w.lease}`);
            return false;
          } catch (e) {
            return isApiError(e, 429);
          }
        },
        { timeoutMs: 20_000, intervalMs: 200 },
      );
      await w.deletePod('router-a');
      const a = w.pod('router-a').sidecar!;
      await waitFor('handover backing off on 429', () => backedOff(a, 429), { timeoutMs: 20_000 });
      await assertHealthy(t, a);
      await assertHealthy(t, w.pod('router-b').sidecar!);
      t.ok(((await a.metric(/^drainguard_api_errors_total\{code="429"\}/)) ?? 0) > 0);
      // The objects go, the seats free up: the handover completes.
      await w.client.delete(`${fc}/flowschemas/lease-starved`);
      await w.client.delete(`${fc}/prioritylevelconfigurations/lease-starved`);
      release();
      await waitFor('router-b leading', () => w.pod('router-b').sim.leading, { timeoutMs: 30_000 });
      t.equal(await a.exited, 0);
      t.equal(handoverResult(a).outcome, 'handed-over', a.dump());
      t.strictSame(w.splitBrain(), []);
    } finally {
      release();
      await Promise.all(holders);
      seatClient.close();
      saClient.close();
      await hook.close();
      await w.cleanup();
    }
  },
);

t.test(
  'API server down for a while: sidecars keep running and healthy, then hand over as usual',
  async (t) => {
    const w = await LeaseScene.create(cp, { nodes: ['a', 'b'] }, 'lease-outage');
    try {
      await startTwoRouters(w);
      const a = w.pod('router-a').sidecar!;
      await cp.stopApiServer();
      try {
        await waitFor(
          'sidecar saw the API unreachable',
          async () => ((await a.metric(/^drainguard_api_errors_total\{code="0"\}/)) ?? 0) > 0,
          { timeoutMs: 30_000, intervalMs: 200 },
        );
        await assertHealthy(t, a);
        await assertHealthy(t, w.pod('router-b').sidecar!);
      } finally {
        await cp.startApiServer();
      }
      // The old leader may have lost the Lease to its renew deadline meanwhile; wait for a leader.
      await waitFor('a leader again', () => w.pod('router-a').sim.leading || w.pod('router-b').sim.leading, {
        timeoutMs: 40_000,
      });
      await w.waitSidecarsReady(40_000);
      const leader = w.pod('router-a').sim.leading ? 'router-a' : 'router-b';
      const other = leader === 'router-a' ? 'router-b' : 'router-a';
      await w.deletePod(leader);
      await waitFor(`${other} leading`, () => w.pod(other).sim.leading, { timeoutMs: 15_000 });
      const sc = w.pod(leader).sidecar!;
      t.equal(await sc.exited, 0);
      t.equal(handoverResult(sc).outcome, 'handed-over', sc.dump());
      t.strictSame(w.splitBrain(), []);
    } finally {
      await w.cleanup();
    }
  },
);
