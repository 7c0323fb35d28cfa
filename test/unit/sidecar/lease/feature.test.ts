// The feature's I/O edge with a scripted API: which calls it makes, and which it never makes.
import t from 'tap';
import { FakeDrain, fakeContext } from '../../../../lab/fake/feature-context.ts';
import { systemClock, waitFor } from '../../../../shared/clock.ts';
import { ApiError } from '../../../../shared/kube/api-error.ts';
import type { KubeClient } from '../../../../shared/kube/client.ts';
import type { Lease, Pod } from '../../../../shared/kube/types.ts';
import { LeaseHandover } from '../../../../sidecar/lease/feature.ts';

const NS = 'site-a';
const LEASE_PATH = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/skupper-site-leader`;

function podWith(name: string, node: string, leader: 'running' | 'terminated'): Pod {
  return {
    metadata: { name, namespace: NS, labels: { 'skupper.io/component': 'router' } },
    spec: { nodeName: node },
    status: {
      phase: 'Running',
      conditions: [{ type: 'Ready', status: 'True' }],
      containerStatuses: [
        {
          name: 'kube-adaptor',
          state: leader === 'running' ? { running: {} } : { terminated: { exitCode: 0 } },
        },
      ],
    },
  };
}

/**
 * A scripted API: GET/PUT of one Lease, a pod list (plus `morePods`), failures queued per method,
 * and `onConflict`, run as a PUT is refused with 409 (the write that got in first).
 */
function fakeApi(holder: string, morePods: Pod[] = []) {
  let lease: Lease = {
    metadata: { name: 'skupper-site-leader', namespace: NS, resourceVersion: '1' },
    spec: {
      holderIdentity: holder,
      leaseDurationSeconds: 15,
      leaseTransitions: 2,
      renewTime: '2026-01-01T00:00:00.000000Z',
    },
  };
  const calls: string[] = [];
  const watchers = new Set<(ev: { type: string; object: Lease }) => void>();
  /** A write as the API server makes it: a new resourceVersion, and a watch event. */
  const write = (body: Lease) => {
    lease = {
      ...body,
      metadata: { ...body.metadata, resourceVersion: String(Number(lease.metadata?.resourceVersion) + 1) },
    };
    for (const on of watchers) on({ type: 'MODIFIED', object: structuredClone(lease) });
    return lease;
  };
  const failures: Record<string, number[]> = { GET: [], PUT: [] };
  const hooks: { onConflict?: () => void } = {};
  const fail = (m: string) => {
    const code = failures[m]?.shift();
    if (code !== undefined) throw new ApiError(m, LEASE_PATH, code, 'Injected', 'injected');
  };
  const client = {
    async get(path: string) {
      calls.push(`GET ${path}`);
      if (path === LEASE_PATH) {
        fail('GET');
        return structuredClone(lease);
      }
      if (path.endsWith('/leases')) return { metadata: { resourceVersion: '1' }, items: [lease] };
      if (path.endsWith('/pods'))
        return {
          items: [podWith('router-a', 'n1', 'terminated'), podWith('router-b', 'n2', 'running'), ...morePods],
        };
      throw new ApiError('GET', path, 404, 'NotFound', 'no such object');
    },
    async replace(path: string, body: Lease) {
      calls.push(`PUT ${path}`);
      if (failures.PUT?.[0] === 409) hooks.onConflict?.();
      fail('PUT');
      const written = write(body);
      // The successor renews right after a handover, as its elector's next retry would.
      if (written.spec?.holderIdentity === 'router-b')
        setImmediate(() =>
          write({ ...lease, spec: { ...lease.spec, renewTime: '2026-01-01T00:00:09.000000Z' } }),
        );
      return written;
    },
    watch(_p: string, _q: unknown, on: (ev: { type: string; object: Lease }) => void, signal: AbortSignal) {
      watchers.add(on);
      return new Promise<void>((r) =>
        signal.addEventListener(
          'abort',
          () => {
            watchers.delete(on);
            r();
          },
          { once: true },
        ),
      );
    },
  };
  return {
    client: client as unknown as KubeClient,
    calls,
    failures,
    hooks,
    /** Somebody renews the Lease as it stands (a new renewTime). */
    renew: () => write({ ...lease, spec: { ...lease.spec, renewTime: '2026-01-01T00:00:05.000000Z' } }),
    /** Somebody else takes the Lease (a restarted leader elected again). */
    take: (holder: string) => write({ ...lease, spec: { ...lease.spec, holderIdentity: holder } }),
    lease: () => lease,
    watched: () => watchers.size > 0,
  };
}

function context(
  api: ReturnType<typeof fakeApi>,
  leader: 'running' | 'terminated',
  env: Record<string, string> = {},
) {
  const drain = new FakeDrain();
  drain.pod = podWith('router-a', 'n1', leader);
  const { ctx, events } = fakeContext({
    env: {
      DRAINGUARD_PROFILE: 'skupper-router',
      DRAINGUARD_FEATURES: 'lease-handover',
      DRAINGUARD_LEASES: 'skupper-site-leader',
      DRAINGUARD_POD_NAME: 'router-a',
      DRAINGUARD_POD_NAMESPACE: NS,
      DRAINGUARD_NODE_NAME: 'n1',
      DRAINGUARD_LEADER_STOP_TIMEOUT_SECONDS: '1',
      DRAINGUARD_VERIFY_SECONDS: '2',
      ...env,
    },
    client: api.client,
    clock: systemClock,
    drain,
  });
  /** The pod terminates, once the feature watches the Lease (as it long has in a real pod). */
  const terminate = async (podReplaced = false) => {
    await waitFor('the Lease watched', api.watched, { timeoutMs: 5_000 });
    drain.set({ terminating: true, podReplaced });
  };
  return {
    ctx,
    /** Starts the feature, terminates the pod, waits for the handover: its result for the Lease. */
    handover: async (podReplaced = false) => {
      const cap = new LeaseHandover(ctx);
      await cap.start();
      await terminate(podReplaced);
      await cap.stop();
      return (await cap.result)?.[0];
    },
    /** The reasons of the Events recorded so far. */
    reasons: () => events.map((e) => e.reason),
    events: () => events,
  };
}

t.test('lease handover feature (scripted API)', async (t) => {
  t.test(
    'hands over after backing off on 429 and 503, verifies through the watch, records an Event',
    async (t) => {
      const api = fakeApi('router-a');
      api.failures.GET = [429];
      api.failures.PUT = [503];
      const { ctx, handover, reasons } = context(api, 'terminated');
      const r = await handover();
      t.equal(r?.outcome, 'handed-over');
      t.equal(api.lease().spec?.holderIdentity, 'router-b');
      t.equal(api.lease().spec?.leaseTransitions, 3);
      t.equal(api.calls.filter((c) => c.startsWith('PUT')).length, 2, 'one failed write, one good');
      t.strictSame(
        api.calls.slice(api.calls.lastIndexOf(`PUT ${LEASE_PATH}`) + 1).filter((c) => c.startsWith('GET')),
        [],
        "no GET after the write: the successor's renew is seen through the informer's watch",
      );
      t.strictSame(reasons(), ['LeaseHandedOver']);
      t.match(
        ctx.metrics.render(),
        /drainguard_lease_handovers_total\{lease="site-a\/skupper-site-leader",outcome="handed-over"\} 1/,
      );
    },
  );

  t.test('decides again after a 409 on a Lease still its own, and hands over', async (t) => {
    const api = fakeApi('router-a');
    api.failures.PUT = [409];
    const { handover, reasons } = context(api, 'terminated');
    const r = await handover();
    t.equal(r?.outcome, 'handed-over');
    t.equal(api.lease().spec?.holderIdentity, 'router-b');
    t.equal(api.calls.filter((c) => c.startsWith('PUT')).length, 2, 'the conflicting write, then a new one');
    t.strictSame(reasons(), ['LeaseHandedOver']);
  });

  t.test('leaves a Lease alone while the leader container runs', async (t) => {
    const api = fakeApi('router-a');
    const { handover, reasons } = context(api, 'running');
    const r = await handover();
    t.equal(r?.outcome, 'leader-still-running');
    t.equal(api.calls.filter((c) => c.startsWith('PUT')).length, 0);
    t.strictSame(reasons(), ['LeaseLeftToExpire']);
  });

  t.test('never writes a Lease another pod holds, nor in observe-only mode', async (t) => {
    const other = fakeApi('router-b');
    t.equal((await context(other, 'terminated').handover())?.outcome, 'not-holder');
    t.equal(other.calls.filter((c) => c.startsWith('PUT')).length, 0);

    const mine = fakeApi('router-a');
    const b = context(mine, 'terminated', { DRAINGUARD_OBSERVE_ONLY: 'true' });
    t.equal((await b.handover())?.outcome, 'observed');
    t.equal(mine.calls.filter((c) => c.startsWith('PUT')).length, 0);
    t.strictSame(b.reasons(), ['LeaseHandoverObserved']);
  });

  t.test(
    'never touches a Lease once the own pod was re-created under the same name (its identity may be the new pod)',
    async (t) => {
      const api = fakeApi('router-a');
      const { handover, reasons } = context(api, 'terminated');
      const r = await handover(true);
      t.equal(r?.outcome, 'pod-replaced');
      t.equal(api.calls.filter((c) => c.startsWith('PUT')).length, 0, 'no Lease write');
      t.equal(api.lease().spec?.holderIdentity, 'router-a');
      t.strictSame(reasons(), []);
    },
  );

  t.test('gives up when the grace period ends, not at the end of its budget (30 s)', async (t) => {
    const api = fakeApi('router-a');
    api.failures.GET = Array.from({ length: 10_000 }, () => 503);
    const { ctx, handover, reasons } = context(api, 'terminated');
    // Deleted with a 3 s grace period (kubectl delete --grace-period=3).
    const pod = podWith('router-a', 'n1', 'terminated');
    pod.metadata = {
      ...pod.metadata,
      deletionTimestamp: new Date(Date.now() + 3_000).toISOString(),
      deletionGracePeriodSeconds: 3,
    };
    (ctx.drain as unknown as FakeDrain).pod = pod;
    const t0 = Date.now();
    const r = await Promise.race([
      handover(),
      new Promise<undefined>((res) => setTimeout(() => res(undefined), 8_000)),
    ]);
    t.ok(r, 'the handover ended within 8 s');
    t.equal(r?.outcome, 'api-failed');
    t.ok(Date.now() - t0 < 3_000, `ended ${Date.now() - t0} ms after termination, before the 3 s kill`);
    t.strictSame(reasons(), ['LeaseHandoverFailed']);
  });

  t.test(
    'node-name: another live pod on this node shares the identity (surge rollout): the Lease is left alone',
    async (t) => {
      const surge = podWith('router-c', 'n1', 'running');
      const api = fakeApi('n1', [surge]);
      const { handover, reasons, events } = context(api, 'terminated', {
        DRAINGUARD_IDENTITY_SCHEME: 'node-name',
      });
      const r = await handover();
      t.equal(r?.outcome, 'identity-shared');
      t.equal(api.calls.filter((c) => c.startsWith('PUT')).length, 0, 'no Lease write');
      t.equal(api.lease().spec?.holderIdentity, 'n1');
      t.strictSame(reasons(), ['LeaseIdentityShared']);
      t.match(events()[0]?.message, /Lease site-a\/skupper-site-leader left alone: .*n1.* router-c/);
    },
  );

  t.test('node-name without a successor selector: the pods on this node are looked at', async (t) => {
    const env = {
      DRAINGUARD_PROFILE: 'lease',
      DRAINGUARD_GUARDED_CONTAINER: 'kube-adaptor',
      DRAINGUARD_IDENTITY_SCHEME: 'node-name',
    };
    const shared = fakeApi('n1', [podWith('router-c', 'n1', 'running')]);
    t.equal((await context(shared, 'terminated', env).handover())?.outcome, 'identity-shared');
    t.ok(
      shared.calls.some((c) => c.startsWith(`GET /api/v1/namespaces/${NS}/pods`)),
      "the node's pods were read",
    );
    t.equal(shared.calls.filter((c) => c.startsWith('PUT')).length, 0);
    const alone = fakeApi('n1');
    t.equal(
      (await context(alone, 'terminated', env).handover())?.outcome,
      'released',
      'no sibling: as before',
    );
  });

  t.test(
    'a 409 because the Lease was renewed under our identity meanwhile: stop, never write over it',
    async (t) => {
      const api = fakeApi('n1');
      api.failures.PUT = [409];
      api.hooks.onConflict = () => api.renew();
      const { handover, reasons } = context(api, 'terminated', { DRAINGUARD_IDENTITY_SCHEME: 'node-name' });
      const r = await handover();
      t.equal(r?.outcome, 'identity-shared');
      t.equal(api.calls.filter((c) => c.startsWith('PUT')).length, 1, 'the refused write only');
      t.equal(api.lease().spec?.holderIdentity, 'n1');
      t.strictSame(reasons(), ['LeaseIdentityShared']);
    },
  );

  t.test(
    'a termination that ended (the leader container restarted, the pod stays) leaves the next one its own handover',
    async (t) => {
      const api = fakeApi('router-a');
      const { ctx, reasons } = context(api, 'terminated');
      const drain = ctx.drain as unknown as FakeDrain;
      const cap = new LeaseHandover(ctx);
      await cap.start();
      await waitFor('the Lease watched', api.watched, { timeoutMs: 5_000 });
      // A liveness restart's preStop taken for a deletion (the node drains, or the own Pod is unreadable).
      drain.set({ terminating: true });
      t.equal((await cap.result)?.[0]?.outcome, 'handed-over', 'the first handover');
      // The restarted leader container runs: not terminating any more; it is elected again.
      drain.set({ terminating: false });
      api.take('router-a');
      await waitFor('router-a leads again', () => api.lease().spec?.holderIdentity === 'router-a', {
        timeoutMs: 1_000,
      });
      // The real deletion.
      drain.set({ terminating: true });
      await waitFor('a second handover', () => api.lease().spec?.holderIdentity === 'router-b', {
        timeoutMs: 5_000,
      });
      await cap.stop();
      t.equal((await cap.result)?.[0]?.outcome, 'handed-over', 'the second handover');
      t.strictSame(reasons(), ['LeaseHandedOver', 'LeaseHandedOver']);
      t.match(
        ctx.metrics.render(),
        /drainguard_lease_handovers_total\{lease="site-a\/skupper-site-leader",outcome="handed-over"\} 2/,
      );
    },
  );

  t.test('returns from prestop at once', async (t) => {
    const api = fakeApi('router-a');
    const { ctx } = context(api, 'running');
    const cap = new LeaseHandover(ctx);
    await cap.start();
    const t0 = Date.now();
    const summary = await cap.prestop();
    t.ok(Date.now() - t0 < 100);
    t.equal(summary.started, true);
    await cap.stop();
  });
});
