import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { waitFor } from '../../../shared/clock.ts';
import { type ControlPlane, sharedControlPlane } from '../../lib/control-plane.ts';
import { LeaseWorld } from './fixture.ts';

let cp: ControlPlane;
before(async () => {
  cp = await sharedControlPlane();
});
after(async () => {
  await cp?.stop();
});

/** Two router replicas on different nodes, router-a leading, both sidecars up. */
async function twoRouters(extraSidecarEnv: Record<string, string> = {}) {
  const w = await LeaseWorld.create(cp, { nodes: ['a', 'b'] });
  await w.addPod({ name: 'router-a', node: 'a', sidecar: extraSidecarEnv });
  await w.waitLeading('router-a');
  await w.addPod({ name: 'router-b', node: 'b', sidecar: extraSidecarEnv });
  await w.waitSidecarsReady();
  return w;
}

test('leader pod deleted: the Lease goes to the replica on the other node, which leads within seconds', async () => {
  const w = await twoRouters();
  try {
    const a = w.pod('router-a');
    const b = w.pod('router-b');
    await w.deletePod('router-a');
    await waitFor('router-b leading', () => b.sim.leading, { timeoutMs: 15_000, intervalMs: 20 });
    const exited = a.sim.intervals.at(-1)?.end;
    const started = b.sim.intervals.at(-1)?.start;
    assert.ok(exited && started, 'both intervals recorded');
    // Expiry alone would take 15 s plus 2-4.4 s; the handover must beat the lease duration clearly.
    assert.ok(started - exited < 8_000, `leaderless ${started - exited} ms`);
    assert.deepEqual(w.splitBrain(), []);
    assert.equal((await w.readLease()).spec?.holderIdentity, 'router-b');
    assert.equal(await a.sidecar!.exited, 0, 'sidecar exits cleanly after the handover');
    const done = a.sidecar!.find((l) => l.msg === 'Lease handover finished');
    assert.ok(done, a.sidecar!.dump());
    const results = done.results as { outcome: string; successor: string }[];
    assert.equal(results[0]?.outcome, 'handed-over');
    assert.equal(results[0]?.successor, 'router-b');
    const ev = await w.events('LeaseHandedOver');
    assert.equal(ev.length, 1);
    assert.match(ev[0]!.message, /handed to router-b/);
    await a.managed.deleted;
  } finally {
    await w.cleanup();
  }
});
