import t, { type Test } from 'tap';
import { type ControlPlane, sharedControlPlane } from '../../../lab/bed/control-plane.ts';
import { LeaseScene } from '../../../lab/bed/lease-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import type { Lease } from '../../../shared/kube/types.ts';
import { microTime } from '../../../shared/kube/types.ts';
import { handoverResult, startTwoRouters } from './routers.ts';
import { startLeaseWebhook } from './webhook.ts';

let cp: ControlPlane;
t.before(async () => {
  cp = await sharedControlPlane();
});
t.teardown(async () => {
  await cp?.stop();
});

/** A scene of nodes a and b whose Lease writes pass `decide` first; gone when the test ends. */
async function sceneWithWebhook(t: Test, decide: (w: LeaseScene) => Parameters<typeof startLeaseWebhook>[2]) {
  const w = await LeaseScene.create(cp, { nodes: ['a', 'b'] });
  const hook = await startLeaseWebhook(w.client, w.ns, decide(w));
  t.teardown(async () => {
    await hook.close();
    await w.cleanup();
  });
  return w;
}

/**
 * A write that lands between the sidecar's read and its replace, made deterministic: the
 * webhook sees the sidecar's handover write and, before letting it through, performs the
 * concurrent write itself. The API server then answers the sidecar with 409.
 */
async function raceHandover(t: Test, concurrent: (l: Lease) => Lease['spec']) {
  let raced = 0;
  const w = await sceneWithWebhook(t, (w) => async (r) => {
    const to = r.object?.spec?.holderIdentity;
    const from = r.oldObject?.spec?.holderIdentity;
    if (raced === 0 && from === 'router-a' && to === 'router-b') {
      raced++;
      const cur = await w.readLease();
      await w.client.replace(`/apis/coordination.k8s.io/v1/namespaces/${w.ns}/leases/${w.lease}`, {
        ...cur,
        spec: concurrent(cur),
      });
    }
    return { allowed: true };
  });
  return { w, raced: () => raced };
}

/**
 * router-a leads on node a, router-b runs on node b, both sidecars ready; then router-a's pod is
 * deleted, which starts its sidecar's handover. Returns router-a's sidecar.
 */
async function deleteTheLeader(w: LeaseScene) {
  await startTwoRouters(w);
  await w.deletePod('router-a');
  return w.pod('router-a').sidecar!;
}

t.test('concurrent writer takes the Lease during the handover: 409, re-read, stop', async (t) => {
  const { w, raced } = await raceHandover(t, (l) => ({
    ...l.spec,
    holderIdentity: 'elsewhere-7d9f',
    acquireTime: microTime(Date.now()),
    renewTime: microTime(Date.now()),
    leaseTransitions: (l.spec?.leaseTransitions ?? 0) + 1,
  }));
  const a = await deleteTheLeader(w);
  t.equal(await a.exited, 0);
  t.equal(raced(), 1, 'the webhook raced the handover write');
  t.ok(
    a.find((l) => l.msg.includes('409') && l.msg.includes('holder changed')),
    a.dump(),
  );
  t.equal(handoverResult(a).outcome, 'holder-changed');
  t.equal((await w.readLease()).spec?.holderIdentity, 'elsewhere-7d9f');
});

t.test(
  'concurrent renew of our own record (a late write of the old leader): 409, still ours, handed over',
  async (t) => {
    const { w, raced } = await raceHandover(t, (l) => ({ ...l.spec, renewTime: microTime(Date.now()) }));
    const a = await deleteTheLeader(w);
    await waitFor('router-b leading', () => w.pod('router-b').sim.leading, { timeoutMs: 15_000 });
    t.equal(await a.exited, 0);
    t.equal(raced(), 1);
    t.ok(
      a.find((l) => l.msg.includes('409') && l.msg.includes('still ours')),
      a.dump(),
    );
    t.equal(handoverResult(a).outcome, 'handed-over');
    t.strictSame(w.splitBrain(), []);
  },
);

t.test(
  'server errors on the handover write (5xx): logged, backed off with jitter, then handed over',
  async (t) => {
    let failed = 0;
    const w = await sceneWithWebhook(t, () => async (r) => {
      if (r.object?.spec?.holderIdentity === 'router-b' && r.oldObject?.spec?.holderIdentity === 'router-a') {
        // The API server itself retries a failed update once with live data, so a few more
        // denials than the sidecar will see.
        if (failed < 4) {
          failed++;
          return { allowed: false, code: failed % 2 ? 500 : 503, message: 'injected server error' };
        }
      }
      return { allowed: true };
    });
    const a = await deleteTheLeader(w);
    await waitFor('router-b leading', () => w.pod('router-b').sim.leading, { timeoutMs: 15_000 });
    t.equal(await a.exited, 0);
    t.equal(failed, 4);
    const backoffs = a.logs.filter(
      (l) => l.msg === 'API call failed; backing off' && l.what === 'write Lease',
    );
    t.ok(backoffs.length >= 1, a.dump());
    for (const b of backoffs) t.ok(b.code === 500 || b.code === 503, `code ${b.code}`);
    t.equal(handoverResult(a).outcome, 'handed-over');
    t.strictSame(w.splitBrain(), []);
  },
);
