import t, { type Test } from 'tap';
import { type ControlPlane, sharedControlPlane } from '../../../lab/bed/control-plane.ts';
import { LeaseScene } from '../../../lab/bed/lease-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import { handoverResult, startTwoRouters } from './routers.ts';

let cp: ControlPlane;
t.before(async () => {
  cp = await sharedControlPlane();
});
t.teardown(async () => {
  await cp?.stop();
});

/** Two router replicas on different nodes, router-a leading, both sidecars up. */
async function twoRouters(t: Test, sidecarEnv: Record<string, string> = {}) {
  const w = await LeaseScene.create(cp, { nodes: ['a', 'b'] });
  t.teardown(() => w.cleanup());
  return startTwoRouters(w, sidecarEnv);
}

t.test(
  'leader pod deleted: the Lease goes to the replica on the other node, which leads within seconds',
  async (t) => {
    const w = await twoRouters(t);
    const a = w.pod('router-a');
    const b = w.pod('router-b');
    await w.deletePod('router-a');
    await waitFor('router-b leading', () => b.sim.leading, { timeoutMs: 15_000, intervalMs: 20 });
    const exited = a.sim.intervals.at(-1)?.end;
    const started = b.sim.intervals.at(-1)?.start;
    if (exited === undefined || started === undefined) throw new Error('both intervals recorded');
    // Expiry alone would take 15 s plus 2-4.4 s; the handover must beat the lease duration clearly.
    t.ok(started - exited < 8_000, `leaderless ${started - exited} ms`);
    t.strictSame(w.splitBrain(), []);
    t.equal((await w.readLease()).spec?.holderIdentity, 'router-b');
    t.equal(await a.sidecar!.exited, 0, 'sidecar exits cleanly after the handover');
    const result = handoverResult(a.sidecar!);
    t.equal(result.outcome, 'handed-over');
    t.equal(result.successor, 'router-b');
    const ev = await w.events('LeaseHandedOver');
    t.equal(ev.length, 1);
    t.match(ev[0]!.message, /handed to router-b/);
    await a.managed.deleted;
  },
);

/** Managers that wrote the Lease (server-side field tracking names them after the user agent). */
async function leaseWriters(w: LeaseScene): Promise<string[]> {
  const l = await w.readLease();
  const mf = (l.metadata as { managedFields?: { manager?: string }[] }).managedFields ?? [];
  return mf.map((m) => m.manager ?? '');
}

const outcome = (w: LeaseScene, pod: string) => handoverResult(w.pod(pod).sidecar!);

t.test(
  'node drained with kubectl: successor picked early, Lease handed over when the pod goes',
  async (t) => {
    const w = await twoRouters(t);
    const a = w.pod('router-a');
    const r = await cp.kubectl([
      'drain',
      w.node('a'),
      '--force',
      '--ignore-daemonsets',
      '--delete-emptydir-data',
      '--timeout=30s',
    ]);
    t.equal(r.code, 0, `${r.stderr}\n${a.sidecar!.dump()}`);
    await waitFor('router-b leading', () => w.pod('router-b').sim.leading, { timeoutMs: 15_000 });
    t.ok(
      a.sidecar!.find(
        (l) => l.msg.startsWith('node draining: Lease handover prepared') && l.successor === 'router-b',
      ),
      a.sidecar!.dump(),
    );
    await a.sidecar!.exited;
    t.equal(outcome(w, 'router-a').outcome, 'handed-over');
    const gap = w.pod('router-b').sim.intervals.at(-1)!.start - a.sim.intervals.at(-1)!.end!;
    t.ok(gap < 8_000, `leaderless ${gap} ms`);
    t.strictSame(w.splitBrain(), []);
  },
);

t.test('no successor: the Lease is released the client-go way', async (t) => {
  const w = await LeaseScene.create(cp, { nodes: ['a'] });
  try {
    const a = await w.addPod({ name: 'router-a', node: 'a', sidecar: { DRAINGUARD_VERIFY_SECONDS: '2' } });
    await w.waitLeading('router-a');
    await w.waitSidecarsReady();
    await w.deletePod('router-a');
    t.equal(await a.sidecar!.exited, 0);
    t.equal(outcome(w, 'router-a').outcome, 'released');
    const l = await w.readLease();
    t.equal(l.spec?.holderIdentity ?? '', '');
    t.equal(l.spec?.leaseDurationSeconds, 1);
  } finally {
    await w.cleanup();
  }
});

t.test('successor not Ready: another replica is chosen, even on the same node', async (t) => {
  const w = await LeaseScene.create(cp, { nodes: ['a', 'b'] });
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
    t.equal(o.outcome, 'handed-over');
    t.equal(o.successor, 'router-c');
    t.equal(w.pod('router-b').sim.leading, false);
    t.strictSame(w.splitBrain(), []);
  } finally {
    await w.cleanup();
  }
});

t.test('pod-name-prefix identities (controller-runtime): released, never a made-up holder', async (t) => {
  const w = await LeaseScene.create(cp, { nodes: ['a', 'b'], lease: 'op-lease' });
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
    t.equal(outcome(w, 'op-a').outcome, 'released');
    watching = false;
    await watcher;
    for (const h of holders) t.ok([idA, idB, ''].includes(h), `unexpected holder ${h}`);
    t.strictSame(w.splitBrain(), []);
  } finally {
    watching = false;
    await watcher;
    await w.cleanup();
  }
});

t.test('leader container that never stops: the Lease is left alone to expire', async (t) => {
  const w = await LeaseScene.create(cp, { nodes: ['a', 'b'] });
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
    t.equal(await w.pod('router-a').sidecar!.exited, 0);
    t.equal(outcome(w, 'router-a').outcome, 'leader-still-running');
    const ev = await w.events('LeaseLeftToExpire');
    t.equal(ev.length, 1);
    t.equal((await w.readLease()).spec?.holderIdentity, 'router-a');
    t.ok(w.pod('router-a').sim.leading, 'the old leader still works: a handover now would split the brain');
    t.strictSame(
      (await leaseWriters(w)).filter((m) => m.startsWith('drainguard')),
      [],
    );
  } finally {
    await w.cleanup();
  }
});

t.test('observe-only: records what it would do, writes nothing', async (t) => {
  const w = await twoRouters(t, { DRAINGUARD_OBSERVE_ONLY: 'true' });
  await w.deletePod('router-a');
  t.equal(await w.pod('router-a').sidecar!.exited, 0);
  t.equal(outcome(w, 'router-a').outcome, 'observed');
  const ev = await w.events('LeaseHandoverObserved');
  t.equal(ev.length, 1);
  t.match(ev[0]!.message, /would replace Lease .* \(hand over to router-b\)/);
  t.equal((await w.readLease()).spec?.holderIdentity, 'router-a');
  t.equal(w.pod('router-b').sim.leading, false);
  t.strictSame(
    (await leaseWriters(w)).filter((m) => m.startsWith('drainguard')),
    [],
  );
});

t.test(
  'no /prestop for a lease profile (no hook is injected; no door for other pods); deletion still hands over',
  async (t) => {
    const w = await twoRouters(t);
    const a = w.pod('router-a');
    const res = await a.sidecar!.http('/prestop');
    t.equal(res.status, 404, res.body);
    t.match(res.body, /no \/prestop for this profile/);
    t.equal((await w.readLease()).spec?.holderIdentity, 'router-a', 'nothing handed over by the request');
    t.ok(a.sim.leading);
    await w.deletePod('router-a');
    await waitFor('router-b leading', () => w.pod('router-b').sim.leading, { timeoutMs: 15_000 });
    t.equal(await a.sidecar!.exited, 0);
    t.equal(outcome(w, 'router-a').outcome, 'handed-over');
    t.strictSame(w.splitBrain(), []);
  },
);
