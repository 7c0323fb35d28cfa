// Coordinated leader election (KEP-4355) on a real kube-apiserver with the CoordinatedLeaderElection
// gate on: its election controller elects among the LeaseCandidates of coordinated candidates
// (lab/sim/coordinated-candidate.ts, client-go v0.37.2) and names the holder; the candidates
// never take the Lease themselves. What the server keeps, whom the controller elects, what a
// preferredHolder does, and the leaderless window after the leader pod is deleted, with the
// drainguard sidecar (which releases the Lease) and without (the Lease expires), side by side on
// one server. The figures are printed as `#` lines.
import t from 'tap';
import { type ControlPlane, startControlPlane } from '../../../lab/bed/control-plane.ts';
import { LeaseScene, type PodOptions } from '../../../lab/bed/lease-scene.ts';
import {
  type CoordinatedCandidate,
  OLDEST_EMULATION_VERSION,
} from '../../../lab/sim/coordinated-candidate.ts';
import { waitFor } from '../../../shared/clock.ts';
import { isApiError } from '../../../shared/kube/api-error.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import { type Lease, microTime } from '../../../shared/kube/types.ts';
import { type HandoverResult, handoverResult } from './routers.ts';

const GATE = [
  '--feature-gates=CoordinatedLeaderElection=true',
  '--runtime-config=coordination.k8s.io/v1beta1=true',
];
const LEASE = 'router-leader';
const LEASE_SECONDS = 15;
const TRIALS = Number(process.env.LEASE_CLE_TRIALS ?? 3);

let gated: Promise<ControlPlane> | undefined;
const gatedServer = () => {
  gated ??= startControlPlane({ extraApiServerArgs: GATE });
  return gated;
};
t.teardown(async () => {
  await (await gated?.catch(() => undefined))?.stop();
});

/** A Lease created with a strategy, then updated with a preferredHolder: what the server made of each. */
async function coordinatedWrites(client: KubeClient, ns: string) {
  await client.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  const dir = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`;
  const now = microTime(Date.now());
  const created = await client.create<Lease>(dir, {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: LEASE },
    spec: {
      holderIdentity: 'router-a',
      leaseDurationSeconds: LEASE_SECONDS,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: 0,
      strategy: OLDEST_EMULATION_VERSION,
    },
  });
  const spec = { ...created.spec, strategy: OLDEST_EMULATION_VERSION, preferredHolder: 'router-b' };
  await client.replace<Lease>(`${dir}/${LEASE}`, { ...created, spec });
  return { created, read: await client.get<Lease>(`${dir}/${LEASE}`), dir };
}

t.test('without the gate the API server drops strategy and preferredHolder (control)', async (t) => {
  const plain = await startControlPlane();
  const client = plain.client();
  try {
    const { created, read } = await coordinatedWrites(client, 'cle-control');
    t.equal(created.spec?.strategy, undefined, 'strategy dropped on create');
    t.equal(read.spec?.strategy, undefined, 'strategy dropped on update');
    t.equal(read.spec?.preferredHolder, undefined, 'preferredHolder dropped on update');
  } finally {
    client.close();
    await plain.stop();
  }
});

t.test(
  'with the gate: strategy and preferredHolder are kept; preferredHolder needs a strategy',
  async (t) => {
    const client = (await gatedServer()).client();
    try {
      const { created, read, dir } = await coordinatedWrites(client, 'cle-kept');
      t.equal(created.spec?.strategy, OLDEST_EMULATION_VERSION, 'strategy kept on create');
      t.equal(read.spec?.strategy, OLDEST_EMULATION_VERSION, 'strategy kept on update');
      t.equal(read.spec?.preferredHolder, 'router-b', 'preferredHolder kept on update');
      const noStrategy = { ...read.spec };
      delete noStrategy.strategy;
      const err = await client
        .replace(`${dir}/${LEASE}`, { ...read, spec: noStrategy })
        .catch((e: unknown) => e);
      t.ok(isApiError(err, 422), `a preferredHolder without strategy is refused: ${String(err)}`);
    } finally {
      client.close();
    }
  },
);

const SIDECAR = {
  DRAINGUARD_PROFILE: 'lease',
  DRAINGUARD_LEASES: LEASE,
  DRAINGUARD_GUARDED_CONTAINER: 'elector',
  DRAINGUARD_SUCCESSOR_SELECTOR: 'app=router',
  DRAINGUARD_IDENTITY_SCHEME: 'pod-name',
};
const router = (name: string, node: string, sidecar: boolean): PodOptions => ({
  name,
  node,
  labels: { app: 'router' },
  leaderContainer: 'elector',
  sidecar: sidecar ? SIDECAR : false,
});

interface LeaseState {
  t: number;
  holder: string;
  preferred: string | undefined;
  strategy: string | undefined;
  seconds: number | undefined;
  renewMs: number;
}

/** Every version of the scene's Lease as a watch delivers it, with the time it arrived. */
function recordLease(w: LeaseScene) {
  const states: LeaseState[] = [];
  const stop = new AbortController();
  const done = w.client
    .watch<Lease>(
      `/apis/coordination.k8s.io/v1/namespaces/${w.ns}/leases`,
      { fieldSelector: `metadata.name=${w.lease}` },
      (ev) => {
        if (ev.type !== 'ADDED' && ev.type !== 'MODIFIED') return;
        const s = ev.object.spec ?? {};
        states.push({
          t: Date.now(),
          holder: s.holderIdentity ?? '',
          preferred: s.preferredHolder,
          strategy: s.strategy,
          seconds: s.leaseDurationSeconds,
          renewMs: Date.parse(s.renewTime ?? ''),
        });
      },
      stop.signal,
    )
    .catch(() => {});
  return {
    states,
    async stop() {
      stop.abort();
      await done;
    },
  };
}

const coordinated = (w: LeaseScene, pod: string) => w.pod(pod).sim as CoordinatedCandidate;

/** Two coordinated routers, router-a elected by the controller, router-b's LeaseCandidate in place. */
async function twoRouters(cp: ControlPlane, sidecar: boolean): Promise<LeaseScene> {
  const w = await LeaseScene.create(cp, { nodes: ['a', 'b'], lease: LEASE, coordinated: true });
  try {
    await w.addPod(router('router-a', 'a', sidecar));
    await w.waitLeading('router-a', 60_000);
    // The controller orders equal versions by creationTimestamp, whole seconds, and breaks a tie
    // by its cache's (random) order: router-b's LeaseCandidate comes a second later, so router-a
    // is the oldest candidate.
    const created = await waitFor(
      'router-a LeaseCandidate seen',
      () => coordinated(w, 'router-a').registration.cached?.metadata?.creationTimestamp,
      { timeoutMs: 15_000 },
    );
    await waitFor('a later second', () => Date.now() >= Date.parse(created) + 1_100, { timeoutMs: 5_000 });
    await w.addPod(router('router-b', 'b', false));
    await waitFor('router-b LeaseCandidate created', () => coordinated(w, 'router-b').registration.cached, {
      timeoutMs: 15_000,
    });
    // A sidecar starts in a few seconds; a machine running other suites beside this one has been
    // seen to take over 30.
    await w.waitSidecarsReady(90_000);
    return w;
  } catch (e) {
    await w.cleanup();
    throw e;
  }
}

interface CandidateList {
  items: {
    metadata: { name: string; creationTimestamp?: string };
    spec?: { leaseName?: string; strategy?: string; renewTime?: string };
  }[];
}

t.test(
  'the controller elects among the LeaseCandidates: it creates the Lease and names the oldest',
  async (t) => {
    const w = await twoRouters(await gatedServer(), false);
    t.teardown(() => w.cleanup());
    const lcs = await w.client.get<CandidateList>(
      `/apis/coordination.k8s.io/v1beta1/namespaces/${w.ns}/leasecandidates`,
    );
    t.strictSame(
      lcs.items.map((lc) => [lc.metadata.name, lc.spec?.leaseName, lc.spec?.strategy]).sort(),
      [
        ['router-a', LEASE, OLDEST_EMULATION_VERSION],
        ['router-b', LEASE, OLDEST_EMULATION_VERSION],
      ],
      'one LeaseCandidate per router, for the Lease',
    );
    const age = (name: string) =>
      Date.parse(lcs.items.find((lc) => lc.metadata.name === name)?.metadata.creationTimestamp ?? '');
    t.ok(age('router-a') < age('router-b'), 'router-a is the oldest candidate');
    const lease = await w.readLease();
    t.equal(lease.spec?.holderIdentity, 'router-a', 'the controller named the oldest candidate');
    t.equal(lease.spec?.strategy, OLDEST_EMULATION_VERSION, 'and set its strategy');
    const managers = ((lease.metadata as { managedFields?: { manager?: string }[] }).managedFields ?? []).map(
      (m) => m.manager,
    );
    t.ok(managers.includes('kube-apiserver'), `the API server wrote the Lease: ${managers.join(', ')}`);
    t.equal(w.pod('router-b').sim.intervals.length, 0, 'router-b never led');
  },
);

t.test('preferredHolder is honoured by the holder (end of term), not by the controller', async (t) => {
  const w = await twoRouters(await gatedServer(), false);
  t.teardown(() => w.cleanup());
  const a = w.pod('router-a').sim;
  const lease = await w.readLease();
  t.equal(lease.spec?.holderIdentity, 'router-a', 'router-a holds the Lease');
  const rec = recordLease(w);
  t.teardown(() => rec.stop());
  const path = `/apis/coordination.k8s.io/v1/namespaces/${w.ns}/leases/${LEASE}`;
  const marked = await w.client.replace<Lease>(path, {
    ...lease,
    spec: { ...lease.spec, preferredHolder: 'router-b' },
  });
  const markedRenew = Date.parse(marked.spec?.renewTime ?? '');
  // RenewDeadline (10 s) after its last renew, at most one retry (2.4 s) later.
  await waitFor('router-a ends its term', () => !a.leading, { timeoutMs: 20_000, intervalMs: 20 });
  t.equal(a.intervals.at(-1)?.endedBy, 'lost', 'its renew loop failed');
  t.notOk(
    rec.states.some((x) => x.holder === 'router-a' && x.seconds === LEASE_SECONDS && x.renewMs > markedRenew),
    'router-a never renewed the Lease after the preferredHolder: end of term',
  );
  // ReleaseOnCancel released it; the controller elects by its strategy among the candidates that
  // answer its ping: router-a again (the oldest), whatever preferredHolder said.
  const again = await waitFor('a leader again', () => w.intervals().find((i) => i.end === undefined), {
    timeoutMs: 30_000,
    intervalMs: 20,
  });
  t.equal(again.identity, 'router-a', `router-a leads again: ${JSON.stringify(rec.states)}`);
  const after = await w.readLease();
  t.equal(after.spec?.holderIdentity, 'router-a', 'the controller named router-a again');
  t.equal(after.spec?.preferredHolder, undefined, 'the controller cleared preferredHolder');
  t.equal(w.pod('router-b').sim.intervals.length, 0, 'router-b never led');
  t.strictSame(w.splitBrain(), [], 'never two leaders');
});

interface Trial {
  arm: 'drainguard' | 'baseline';
  /** Leader work ended (router-a's process stopped) → router-b's first leader work. */
  leaderlessMs: number;
  /** Leader stop → the Lease naming router-b, as the watch saw it (the controller's write). */
  electedMs: number;
  /** Leader stop → when the Lease would expire: router-a's last renewTime + its duration. */
  expiresMs: number;
  /** Leader stop → the released Lease seen (drainguard). */
  releasedMs?: number;
  outcome?: string;
  /** The sidecar's account of its handover. */
  detail?: string;
  /** The Lease's versions from the leader's stop on. */
  after: LeaseState[];
}

/** The controller's electionDuration: a LeaseCandidate renewed within it counts as answering. */
const ELECTION_MS = 5_000;

/**
 * As in a cluster where the routers have run a while: both LeaseCandidates last renewed more than
 * the controller's electionDuration ago. A fresher one counts as having answered a ping, and after
 * a release the controller would name the stopped pod again (the oldest candidate); in a running
 * cluster a candidate renews every 5 min, or when pinged.
 */
async function settle(w: LeaseScene): Promise<void> {
  const aged = (pod: string) => {
    const renewed = Date.parse(coordinated(w, pod).registration.cached?.spec?.renewTime ?? '');
    return renewed + ELECTION_MS + 500 < Date.now();
  };
  await waitFor('LeaseCandidates older than electionDuration', () => aged('router-a') && aged('router-b'), {
    timeoutMs: 15_000,
    intervalMs: 20,
  });
}

async function trial(cp: ControlPlane, arm: Trial['arm']): Promise<Trial> {
  const w = await twoRouters(cp, arm === 'drainguard');
  const rec = recordLease(w);
  try {
    const a = w.pod('router-a');
    const b = w.pod('router-b');
    await settle(w);
    await w.deletePod('router-a');
    await waitFor(`${arm}: router-b leading`, () => b.sim.leading, { timeoutMs: 60_000, intervalMs: 20 });
    const stop = a.sim.intervals.at(-1)?.end;
    const start = b.sim.intervals[0]?.start;
    if (stop === undefined || start === undefined) throw new Error('work intervals missing');
    await waitFor('the renew seen', () => rec.states.at(-1)?.seconds === LEASE_SECONDS, { timeoutMs: 5_000 });
    // router-a's own last renew (its 15 s record), not a later write naming it.
    const own = rec.states.filter(
      (s) => s.t < stop && s.holder === 'router-a' && s.seconds === LEASE_SECONDS,
    );
    const lastRenew = own.at(-1)?.renewMs ?? Number.NaN;
    const after = rec.states.filter((s) => s.t >= stop);
    const at = (pred: (s: LeaseState) => boolean) => (after.find(pred)?.t ?? Number.NaN) - stop;
    const result: Trial = {
      arm,
      leaderlessMs: start - stop,
      electedMs: at((s) => s.holder === 'router-b'),
      expiresMs: lastRenew + LEASE_SECONDS * 1000 - stop,
      after,
    };
    if (a.sidecar) {
      const code = await a.sidecar.exited;
      if (code !== 0) throw new Error(`sidecar exited ${code}:\n${a.sidecar.dump()}`);
      const done = handoverResult(a.sidecar) as HandoverResult & { detail?: string };
      result.outcome = done.outcome;
      if (done.detail !== undefined) result.detail = done.detail;
      result.releasedMs = at((s) => s.holder === '');
    }
    if (w.splitBrain().length > 0) throw new Error(`${arm}: split brain ${JSON.stringify(w.splitBrain())}`);
    return result;
  } finally {
    await rec.stop();
    await w.cleanup();
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((x, y) => x - y);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

t.test('leader pod deleted: leaderless window with drainguard and without (expiry)', async (t) => {
  const cp = await gatedServer();
  const pairs: [Trial, Trial][] = [];
  for (let i = 0; i < TRIALS; i++) {
    // Both arms side by side on the one server; each cleans up before a failure is reported.
    const [dg, base] = await Promise.allSettled([trial(cp, 'drainguard'), trial(cp, 'baseline')]);
    if (dg.status === 'rejected') throw dg.reason;
    if (base.status === 'rejected') throw base.reason;
    pairs.push([dg.value, base.value]);
  }
  for (const x of pairs.flat()) {
    const named = x.after.find((s) => s.holder === 'router-b');
    t.equal(named?.seconds, 5, `${x.arm}: router-b named by the controller (its 5 s Lease)`);
    t.equal(named?.strategy, OLDEST_EMULATION_VERSION, `${x.arm}: strategy kept`);
    t.equal(named?.preferred, undefined, `${x.arm}: no preferredHolder left`);
    t.equal(x.after.at(-1)?.holder, 'router-b', `${x.arm}: router-b holds the Lease`);
    t.ok(
      x.after.every((s) => ['router-a', 'router-b', ''].includes(s.holder)),
      'nobody else ever held it',
    );
  }
  for (const [dg, base] of pairs) {
    t.equal(dg.outcome, 'released', 'the sidecar released the Lease');
    t.match(dg.detail, /coordinated election/, 'because the Lease is coordinated');
    const release = dg.after.find((s) => s.holder === '');
    t.equal(release?.seconds, 1, 'released the client-go way');
    t.equal(release?.strategy, OLDEST_EMULATION_VERSION, 'the release keeps the strategy');
    t.equal(release?.preferred, undefined, 'the release names nobody');
    t.notOk(
      dg.after.some((s) => s.t > (release?.t ?? 0) && s.holder === 'router-a'),
      'the controller never named the stopped pod again',
    );
    t.ok(dg.electedMs < dg.expiresMs, `drainguard: named ${dg.electedMs} ms after the stop, before expiry`);
    t.notOk(
      base.after.some((s) => s.holder === ''),
      'baseline: nobody releases; the holder stays until expiry',
    );
    t.ok(
      base.electedMs >= base.expiresMs,
      `baseline: named ${base.electedMs} ms after the stop, after expiry`,
    );
    t.ok(dg.leaderlessMs < base.leaderlessMs, `${dg.leaderlessMs} ms < ${base.leaderlessMs} ms`);
  }
  const dg = pairs.map(([x]) => x);
  const base = pairs.map(([, x]) => x);
  const figures = {
    test: 'lease-coordinated',
    trials: TRIALS,
    leaderless_ms: dg.map((x) => x.leaderlessMs),
    released_ms: dg.map((x) => x.releasedMs),
    elected_ms: dg.map((x) => x.electedMs),
    expires_ms: dg.map((x) => x.expiresMs),
    baseline_leaderless_ms: base.map((x) => x.leaderlessMs),
    baseline_elected_ms: base.map((x) => x.electedMs),
    baseline_expires_ms: base.map((x) => x.expiresMs),
    leaderless_median_ms: median(dg.map((x) => x.leaderlessMs)),
    baseline_leaderless_median_ms: median(base.map((x) => x.leaderlessMs)),
  };
  const s = (ms: number | undefined) => (ms === undefined ? '-' : (ms / 1000).toFixed(1));
  const row = (xs: (number | undefined)[]) => xs.map(s).join(' / ');
  t.comment(
    `leaderless with drainguard (release): ${row(figures.leaderless_ms)} s, median ${s(figures.leaderless_median_ms)} s`,
  );
  t.comment(
    `  released ${row(figures.released_ms)} s, successor named ${row(figures.elected_ms)} s after the stop`,
  );
  t.comment(
    `leaderless without drainguard (expiry): ${row(figures.baseline_leaderless_ms)} s, median ${s(figures.baseline_leaderless_median_ms)} s`,
  );
  t.comment(
    `  Lease expired ${row(figures.baseline_expires_ms)} s, successor named ${row(figures.baseline_elected_ms)} s after the stop`,
  );
  t.comment(JSON.stringify(figures));
  t.ok(
    figures.leaderless_median_ms < figures.baseline_leaderless_median_ms,
    `median leaderless: ${figures.leaderless_median_ms} ms with drainguard < ${figures.baseline_leaderless_median_ms} ms without`,
  );
});
