import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type ControlPlane, sharedControlPlane } from '../../../lab/control-plane.ts';
import { waitFor } from '../../../shared/clock.ts';
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

/** Managers that wrote the Lease (server-side field tracking names them after the user agent). */
async function leaseWriters(w: LeaseWorld): Promise<string[]> {
  const l = await w.readLease();
  const mf = (l.metadata as { managedFields?: { manager?: string }[] }).managedFields ?? [];
  return mf.map((m) => m.manager ?? '');
}

function outcome(w: LeaseWorld, pod: string) {
  const done = w.pod(pod).sidecar!.find((l) => l.msg === 'Lease handover finished');
  assert.ok(done, `no handover result in ${pod}'s sidecar log:\n${w.pod(pod).sidecar!.dump()}`);
  return (done.results as { outcome: string; successor?: string }[])[0]!;
}

test('node drained with kubectl: successor picked early, Lease handed over when the pod goes', async () => {
  const w = await twoRouters();
  try {
    const a = w.pod('router-a');
    const r = await cp.kubectl([
      'drain',
      w.node('a'),
      '--force',
      '--ignore-daemonsets',
      '--delete-emptydir-data',
      '--timeout=30s',
    ]);
    assert.equal(r.code, 0, `${r.stderr}\n${a.sidecar!.dump()}`);
    await waitFor('router-b leading', () => w.pod('router-b').sim.leading, { timeoutMs: 15_000 });
    assert.ok(
      a.sidecar!.find(
        (l) => l.msg.startsWith('node draining: Lease handover prepared') && l.successor === 'router-b',
      ),
      a.sidecar!.dump(),
    );
    await a.sidecar!.exited;
    assert.equal(outcome(w, 'router-a').outcome, 'handed-over');
    const gap = w.pod('router-b').sim.intervals.at(-1)!.start - a.sim.intervals.at(-1)!.end!;
    assert.ok(gap < 8_000, `leaderless ${gap} ms`);
    assert.deepEqual(w.splitBrain(), []);
  } finally {
    await w.cleanup();
  }
});

test('no successor: the Lease is released the client-go way', async () => {
  const w = await LeaseWorld.create(cp, { nodes: ['a'] });
  try {
    const a = await w.addPod({ name: 'router-a', node: 'a', sidecar: { DRAINGUARD_VERIFY_SECONDS: '2' } });
    await w.waitLeading('router-a');
    await w.waitSidecarsReady();
    await w.deletePod('router-a');
    assert.equal(await a.sidecar!.exited, 0);
    assert.equal(outcome(w, 'router-a').outcome, 'released');
    const l = await w.readLease();
    assert.equal(l.spec?.holderIdentity ?? '', '');
    assert.equal(l.spec?.leaseDurationSeconds, 1);
  } finally {
    await w.cleanup();
  }
});

test('successor not Ready: another replica is chosen, even on the same node', async () => {
  const w = await LeaseWorld.create(cp, { nodes: ['a', 'b'] });
  try {
    await w.addPod({ name: 'router-a', node: 'a' });
    await w.waitLeading('router-a');
    await w.addPod({ name: 'router-b', node: 'b', ready: false });
    await w.addPod({ name: 'router-c', node: 'a' });
    await w.waitSidecarsReady();
    await w.deletePod('router-a');
    await waitFor('router-c leading', () => w.pod('router-c').sim.leading, { timeoutMs: 15_000 });
    await w.pod('router-a').sidecar!.exited;
    const o = outcome(w, 'router-a');
    assert.equal(o.outcome, 'handed-over');
    assert.equal(o.successor, 'router-c');
    assert.equal(w.pod('router-b').sim.leading, false);
    assert.deepEqual(w.splitBrain(), []);
  } finally {
    await w.cleanup();
  }
});

test('pod-name-prefix identities (controller-runtime): released, never a made-up holder', async () => {
  const w = await LeaseWorld.create(cp, { nodes: ['a', 'b'], lease: 'op-lease' });
  const holders = new Set<string>();
  let watching = true;
  const watcher = (async () => {
    while (watching) {
      try {
        holders.add((await w.readLease()).spec?.holderIdentity ?? '');
      } catch {}
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    const env = {
      DRAINGUARD_PROFILE: 'lease',
      DRAINGUARD_LEASES: 'op-lease',
      DRAINGUARD_GUARDED_CONTAINER: 'manager',
      DRAINGUARD_SUCCESSOR_SELECTOR: 'app=op',
      DRAINGUARD_IDENTITY_SCHEME: 'pod-name-prefix',
    };
    const common = { labels: { app: 'op' }, leaderContainer: 'manager', sidecar: env };
    const idA = 'op-a_3e0c2a51-8f4d-4b6e-a1c9-7d2e5f8b0a14';
    const idB = 'op-b_9b1d7c02-44aa-4c1e-8e3f-2f6a0d9c5b77';
    await w.addPod({ name: 'op-a', node: 'a', identity: idA, ...common });
    await w.waitLeading('op-a');
    await w.addPod({ name: 'op-b', node: 'b', identity: idB, ...common });
    await w.waitSidecarsReady();
    await w.deletePod('op-a');
    await waitFor('op-b leading', () => w.pod('op-b').sim.leading, { timeoutMs: 15_000 });
    await w.pod('op-a').sidecar!.exited;
    assert.equal(outcome(w, 'op-a').outcome, 'released');
    watching = false;
    await watcher;
    for (const h of holders) assert.ok([idA, idB, ''].includes(h), `unexpected holder ${h}`);
    assert.deepEqual(w.splitBrain(), []);
  } finally {
    watching = false;
    await watcher;
    await w.cleanup();
  }
});

test('leader container that never stops: the Lease is left alone to expire', async () => {
  const w = await LeaseWorld.create(cp, { nodes: ['a', 'b'] });
  try {
    const env = { DRAINGUARD_LEADER_STOP_TIMEOUT_SECONDS: '2' };
    await w.addPod({
      name: 'router-a',
      node: 'a',
      sidecar: env,
      leaderIgnoresSigterm: true,
      graceSeconds: 60,
    });
    await w.waitLeading('router-a');
    await w.addPod({ name: 'router-b', node: 'b', sidecar: env });
    await w.waitSidecarsReady();
    await w.deletePod('router-a');
    assert.equal(await w.pod('router-a').sidecar!.exited, 0);
    assert.equal(outcome(w, 'router-a').outcome, 'leader-still-running');
    const ev = await w.events('LeaseLeftToExpire');
    assert.equal(ev.length, 1);
    assert.equal((await w.readLease()).spec?.holderIdentity, 'router-a');
    assert.ok(
      w.pod('router-a').sim.leading,
      'the old leader still works: a handover now would split the brain',
    );
    assert.deepEqual(
      (await leaseWriters(w)).filter((m) => m.startsWith('drainguard')),
      [],
    );
  } finally {
    await w.cleanup();
  }
});

test('observe-only: records what it would do, writes nothing', async () => {
  const w = await twoRouters({ DRAINGUARD_OBSERVE_ONLY: 'true' });
  try {
    await w.deletePod('router-a');
    assert.equal(await w.pod('router-a').sidecar!.exited, 0);
    assert.equal(outcome(w, 'router-a').outcome, 'observed');
    const ev = await w.events('LeaseHandoverObserved');
    assert.equal(ev.length, 1);
    assert.match(ev[0]!.message, /would replace Lease .* \(hand over to router-b\)/);
    assert.equal((await w.readLease()).spec?.holderIdentity, 'router-a');
    assert.equal(w.pod('router-b').sim.leading, false);
    assert.deepEqual(
      (await leaseWriters(w)).filter((m) => m.startsWith('drainguard')),
      [],
    );
  } finally {
    await w.cleanup();
  }
});

test('no /prestop for a lease profile (no hook is injected; no door for other pods); deletion still hands over', async () => {
  const w = await twoRouters();
  try {
    const a = w.pod('router-a');
    const res = await a.sidecar!.http('/prestop');
    assert.equal(res.status, 404, res.body);
    assert.match(res.body, /no \/prestop for this profile/);
    assert.equal(
      (await w.readLease()).spec?.holderIdentity,
      'router-a',
      'nothing handed over by the request',
    );
    assert.ok(a.sim.leading);
    await w.deletePod('router-a');
    await waitFor('router-b leading', () => w.pod('router-b').sim.leading, { timeoutMs: 15_000 });
    assert.equal(await a.sidecar!.exited, 0);
    assert.equal(outcome(w, 'router-a').outcome, 'handed-over');
    assert.deepEqual(w.splitBrain(), []);
  } finally {
    await w.cleanup();
  }
});
