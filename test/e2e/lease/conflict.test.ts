import t from 'tap';
import { type ControlPlane, sharedControlPlane } from '../../../lab/bed/control-plane.ts';
import { LeaseScene } from '../../../lab/bed/lease-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import type { Lease } from '../../../shared/kube/types.ts';
import { microTime } from '../../../shared/kube/types.ts';
import { startLeaseWebhook } from './webhook.ts';

let cp: ControlPlane;
t.before(async () => {
  cp = await sharedControlPlane();
});
t.teardown(async () => {
  await cp?.stop();
});

/**
 * A write that lands between the sidecar's read and its replace, made deterministic: the
 * webhook sees the sidecar's handover write and, before letting it through, performs the
 * concurrent write itself. The API server then answers the sidecar with 409.
 */
async function raceHandover(concurrent: (l: Lease) => Lease['spec']) {
  const w = await LeaseScene.create(cp, { nodes: ['a', 'b'] });
  let raced = 0;
  const hook = await startLeaseWebhook(w.client, w.ns, async (r) => {
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
  return { w, hook, raced: () => raced };
}

t.test('concurrent writer takes the Lease during the handover: 409, re-read, stop', async (t) => {
  const { w, hook, raced } = await raceHandover((l) => ({
    ...l.spec,
    holderIdentity: 'elsewhere-7d9f',
    acquireTime: microTime(Date.now()),
    renewTime: microTime(Date.now()),
    leaseTransitions: (l.spec?.leaseTransitions ?? 0) + 1,
  }));
  try {
    await w.addPod({ name: 'router-a', node: 'a' });
    await w.waitLeading('router-a');
    await w.addPod({ name: 'router-b', node: 'b' });
    await w.waitSidecarsReady();
    await w.deletePod('router-a');
    const a = w.pod('router-a').sidecar!;
    t.equal(await a.exited, 0);
    t.equal(raced(), 1, 'the webhook raced the handover write');
    t.ok(
      a.find((l) => l.msg.includes('409') && l.msg.includes('holder changed')),
      a.dump(),
    );
    const done = a.find((l) => l.msg === 'Lease handover finished');
    t.equal((done?.results as { outcome: string }[] | undefined)?.[0]?.outcome, 'holder-changed');
    t.equal((await w.readLease()).spec?.holderIdentity, 'elsewhere-7d9f');
  } finally {
    await hook.close();
    await w.cleanup();
  }
});

t.test(
  'concurrent renew of our own record (a late write of the old leader): 409, still ours, handed over',
  async (t) => {
    const { w, hook, raced } = await raceHandover((l) => ({ ...l.spec, renewTime: microTime(Date.now()) }));
    try {
      await w.addPod({ name: 'router-a', node: 'a' });
      await w.waitLeading('router-a');
      await w.addPod({ name: 'router-b', node: 'b' });
      await w.waitSidecarsReady();
      await w.deletePod('router-a');
      const a = w.pod('router-a').sidecar!;
      await waitFor('router-b leading', () => w.pod('router-b').sim.leading, { timeoutMs: 15_000 });
      t.equal(await a.exited, 0);
      t.equal(raced(), 1);
      t.ok(
        a.find((l) => l.msg.includes('409') && l.msg.includes('still ours')),
        a.dump(),
      );
      const done = a.find((l) => l.msg === 'Lease handover finished');
      t.equal((done?.results as { outcome: string }[] | undefined)?.[0]?.outcome, 'handed-over');
      t.strictSame(w.splitBrain(), []);
    } finally {
      await hook.close();
      await w.cleanup();
    }
  },
);

t.test(
  'server errors on the handover write (5xx): logged, backed off with jitter, then handed over',
  async (t) => {
    const w = await LeaseScene.create(cp, { nodes: ['a', 'b'] });
    let failed = 0;
    const hook = await startLeaseWebhook(w.client, w.ns, async (r) => {
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
    try {
      await w.addPod({ name: 'router-a', node: 'a' });
      await w.waitLeading('router-a');
      await w.addPod({ name: 'router-b', node: 'b' });
      await w.waitSidecarsReady();
      await w.deletePod('router-a');
      const a = w.pod('router-a').sidecar!;
      await waitFor('router-b leading', () => w.pod('router-b').sim.leading, { timeoutMs: 15_000 });
      t.equal(await a.exited, 0);
      t.equal(failed, 4);
      const backoffs = a.logs.filter(
        (l) => l.msg === 'API call failed; backing off' && l.what === 'write Lease',
      );
      t.ok(backoffs.length >= 1, a.dump());
      for (const b of backoffs) t.ok(b.code === 500 || b.code === 503, `code ${b.code}`);
      const done = a.find((l) => l.msg === 'Lease handover finished');
      t.equal((done?.results as { outcome: string }[] | undefined)?.[0]?.outcome, 'handed-over');
      t.strictSame(w.splitBrain(), []);
    } finally {
      await hook.close();
      await w.cleanup();
    }
  },
);
