// The lease candidate simulator (lab/sim/lease-candidate.ts) against client-go v0.33.0
// tools/leaderelection and skupper's runLeaderElection (2.1.3+/2.2), each test named after the
// upstream function it follows. A virtual clock and an in-memory Lease API: no network, no waiting.
import t, { type Test } from 'tap';
import { VirtualClock } from '../../../lab/fake/virtual-clock.ts';
import {
  type CandidateOptions,
  ExponentialBackOff,
  type LeaseApi,
  LeaseCandidate,
  SKUPPER_RERUN_BACKOFF,
} from '../../../lab/sim/lease-candidate.ts';
import { ApiError } from '../../../shared/kube/api-error.ts';
import type { Lease } from '../../../shared/kube/types.ts';
import { microTime } from '../../../shared/kube/types.ts';

const NS = 'site-a';
const NAME = 'skupper-site-leader';
const DIR = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`;
const PATH = `${DIR}/${NAME}`;
const T0 = Date.UTC(2026, 0, 1);

type Method = 'GET' | 'POST' | 'PUT';
interface Call {
  at: number;
  method: Method;
  code: number;
  holder?: string | null | undefined;
  spec?: Lease['spec'];
}

/**
 * One Lease behind GET/POST/PUT with the API server's rules (404, 409 on an existing name or a stale
 * resourceVersion). `latency` keeps a request in flight (bounded by its timeout and signal); then
 * `fail` may answer it with an error code instead of letting it take effect.
 */
class FakeLeaseApi {
  lease: Lease | undefined;
  private rv = 0;
  readonly calls: Call[] = [];
  fail: (method: Method, spec?: Lease['spec']) => number | undefined = () => undefined;
  latency: (method: Method, spec?: Lease['spec']) => number = () => 0;
  private readonly clock: VirtualClock;
  /** The test that checks the paths the candidate asks for. */
  private readonly t: Test;
  constructor(clock: VirtualClock, t: Test) {
    this.clock = clock;
    this.t = t;
  }

  /** A write by someone else (an admin, the intruder): never fails, bumps the resourceVersion. */
  write(spec: Lease['spec']): void {
    this.lease = this.store({ metadata: { name: NAME, namespace: NS }, spec });
  }
  private store(l: Lease): Lease {
    return structuredClone({ ...l, metadata: { ...l.metadata, resourceVersion: String(++this.rv) } });
  }
  private async answer<T>(
    method: Method,
    spec: Lease['spec'],
    opts: { timeoutMs?: number; signal?: AbortSignal },
    effect: () => T,
  ): Promise<T> {
    const at = this.clock.now();
    const err = (code: number, reason: string) => {
      this.calls.push({ at, method, code, holder: spec?.holderIdentity, spec });
      return new ApiError(method, PATH, code, reason, reason);
    };
    const delay = this.latency(method, spec);
    if (delay > 0) {
      const limit = Math.min(delay, opts.timeoutMs ?? Number.POSITIVE_INFINITY);
      await this.clock.sleep(limit, opts.signal);
      if (opts.signal?.aborted) throw err(0, 'Aborted');
      if (limit < delay) throw err(0, 'Timeout');
    }
    const injected = this.fail(method, spec);
    if (injected !== undefined) throw err(injected, 'Injected');
    let result: T;
    try {
      result = effect();
    } catch (e) {
      if (e instanceof ApiError) throw err(e.code, e.reason);
      throw e;
    }
    this.calls.push({ at, method, code: 200, holder: spec?.holderIdentity, spec });
    return structuredClone(result);
  }
  async get<T>(path: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<T> {
    this.t.equal(path, PATH);
    return this.answer('GET', undefined, opts, () => {
      if (!this.lease) throw new ApiError('GET', PATH, 404, 'NotFound', 'not found');
      return this.lease as T;
    });
  }
  async create<T>(path: string, body: unknown, opts: { timeoutMs?: number; signal?: AbortSignal } = {}) {
    this.t.equal(path, DIR);
    const l = body as Lease;
    return this.answer('POST', l.spec, opts, () => {
      if (this.lease) throw new ApiError('POST', DIR, 409, 'AlreadyExists', 'exists');
      this.lease = this.store(l);
      return this.lease as T;
    });
  }
  async replace<T>(path: string, body: unknown, opts: { timeoutMs?: number; signal?: AbortSignal } = {}) {
    this.t.equal(path, PATH);
    const l = body as Lease;
    return this.answer('PUT', l.spec, opts, () => {
      if (!this.lease) throw new ApiError('PUT', PATH, 404, 'NotFound', 'not found');
      if (l.metadata?.resourceVersion !== this.lease.metadata?.resourceVersion)
        throw new ApiError('PUT', PATH, 409, 'Conflict', 'the object has been modified');
      this.lease = this.store(l);
      return this.lease as T;
    });
  }
  /** Calls from `fromMs` (offset from T0) on, as "METHOD code holder@offset". */
  since(fromMs: number): string[] {
    return this.calls
      .filter((c) => c.at >= T0 + fromMs)
      .map((c) => `${c.method} ${c.code}${c.method === 'GET' ? '' : ` ${c.holder}`}@${c.at - T0}`);
  }
}

function world(t: Test) {
  const clock = new VirtualClock(T0);
  const api = new FakeLeaseApi(clock, t);
  const logs: string[] = [];
  const mk = (identity: string, o: Partial<CandidateOptions> = {}) =>
    new LeaseCandidate({
      client: api as LeaseApi,
      namespace: NS,
      lease: NAME,
      identity,
      clock,
      random: () => 0.5,
      log: (msg, f) => logs.push(`${f.identity ?? ''}: ${msg}`),
      ...o,
    });
  return { clock, api, logs, mk };
}

/** a creates the Lease at 0 and renews every 2 s (0, 2000, 4000, …) with the defaults. */
async function leaderA(t: Test, o: Partial<CandidateOptions> = {}) {
  const w = world(t);
  const a = w.mk('a', o);
  a.start();
  await w.clock.to(0);
  t.ok(a.leading);
  return { ...w, a };
}

t.test(
  'NewLeaderElector: leaseDuration must exceed renewDeadline, renewDeadline must exceed JitterFactor·retryPeriod',
  async (t) => {
    const { mk } = world(t);
    t.throws(() => mk('a', { leaseDurationMs: 10_000 }), /leaseDuration must be greater than renewDeadline/);
    t.throws(() => mk('a', { renewDeadlineMs: 2_400 }), /renewDeadline must be greater than retryPeriod/);
    t.doesNotThrow(() => mk('a', { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 400 }));
  },
);

t.test('tryAcquireOrRenew: the first candidate gets 404, creates the Lease and leads at once', async (t) => {
  const { api, a } = await leaderA(t);
  t.strictSame(api.since(0).slice(0, 2), ['GET 404@0', 'POST 200 a@0']);
  t.equal(api.lease?.spec?.holderIdentity, 'a');
  t.equal(api.lease?.spec?.leaseDurationSeconds, 15);
  t.equal(api.lease?.spec?.leaseTransitions, 0);
  t.match(api.lease?.spec?.renewTime ?? '', /\.\d{6}Z$/);
  t.equal(a.intervals[0]?.start, T0);
  await a.stop();
});

t.test(
  'tryAcquireOrRenew: a leader whose observed record is valid renews with an Update and no Get (optimistic path, client-go ≥ 0.30)',
  async (t) => {
    const { api, clock, a } = await leaderA(t);
    await clock.to(9_000);
    // Run's renew starts right after the acquiring write; then every RetryPeriod after a good one.
    t.strictSame(api.since(0).slice(2), [
      'PUT 200 a@0',
      'PUT 200 a@2000',
      'PUT 200 a@4000',
      'PUT 200 a@6000',
      'PUT 200 a@8000',
    ]);
    t.equal(api.lease?.spec?.renewTime, microTime(T0 + 8_000));
    t.equal(api.lease?.spec?.acquireTime, microTime(T0), 'a renew keeps acquireTime');
    await a.stop();
  },
);

t.test(
  'tryAcquireOrRenew: the optimistic Update failing falls back to Get and the normal path in the same try',
  async (t) => {
    // Someone rewrote our own record (renewTime only): 409, re-read, still ours, renewed.
    {
      const { api, clock, a } = await leaderA(t);
      await clock.to(4_500);
      api.write({ ...api.lease!.spec, renewTime: microTime(clock.now()) });
      await clock.to(6_000);
      t.strictSame(api.since(4_500), ['PUT 409 a@6000', 'GET 200@6000', 'PUT 200 a@6000']);
      t.ok(a.leading);
      await a.stop();
    }
    // Someone else holds it now: 409, re-read, held by another and valid: no write.
    {
      const { api, clock, a } = await leaderA(t);
      await clock.to(4_500);
      api.write({ ...api.lease!.spec, holderIdentity: 'x', renewTime: microTime(clock.now()) });
      await clock.to(8_000);
      // Not the leader by its observed record any more: no optimistic Update, a Get each try.
      t.strictSame(api.since(4_500), ['PUT 409 a@6000', 'GET 200@6000', 'GET 200@8000']);
      await a.stop();
    }
  },
);

t.test(
  'tryAcquireOrRenew/isLeaseValid: the optimistic path only while observedTime + the observed leaseDurationSeconds is after now',
  async (t) => {
    for (const [seconds, second] of [
      [15, ['PUT 200 b@3200']],
      [1, ['GET 200@3200', 'PUT 200 b@3200']],
    ] as const) {
      const { api, clock, mk } = world(t);
      // A write naming b (a handover) with this duration; b's first Update fails.
      api.write({
        holderIdentity: 'b',
        leaseDurationSeconds: seconds,
        renewTime: microTime(T0),
        leaseTransitions: 3,
      });
      let failed = false;
      api.fail = (m) => {
        if (m !== 'PUT' || failed) return undefined;
        failed = true;
        return 500;
      };
      const b = mk('b');
      b.start();
      await clock.to(3_200); // acquire retries after RetryPeriod·(1 + 0.5·1.2)
      t.strictSame(api.since(0).slice(0, 2), ['GET 200@0', 'PUT 500 b@0'], `${seconds} s`);
      t.strictSame(api.since(3_200).slice(0, second.length), second, `${seconds} s`);
      t.ok(b.leading);
      t.equal(api.lease?.spec?.leaseTransitions, 3, 'a renew of a record naming b keeps transitions');
      await b.stop();
    }
  },
);

t.test(
  'tryAcquireOrRenew: a takeover waits leaseDurationSeconds from its own observation of the last change, then adds a transition',
  async (t) => {
    const { api, clock, mk } = world(t);
    // Renewed an hour ago by a holder that is gone: renewTime does not count, only what b sees change.
    api.write({
      holderIdentity: 'gone',
      leaseDurationSeconds: 15,
      renewTime: microTime(T0 - 3_600_000),
      acquireTime: microTime(T0 - 3_600_000),
      leaseTransitions: 4,
    });
    const b = mk('b');
    b.start();
    await clock.to(15_000);
    t.equal(b.leading, false, 'held for 15 s from b’s first read');
    await clock.to(16_000); // tries every 3.2 s: 0, 3.2, …, 16
    t.ok(b.leading);
    t.equal(b.intervals[0]?.start, T0 + 16_000);
    t.equal(api.lease?.spec?.holderIdentity, 'b');
    t.equal(api.lease?.spec?.leaseTransitions, 5);
    t.equal(api.lease?.spec?.acquireTime, microTime(T0 + 16_000));
    await b.stop();
  },
);

t.test(
  'renew: a failed renew is retried on the poll’s ticker (start + k·RetryPeriod) until RenewDeadline, then leadership is lost',
  async (t) => {
    const { api, clock, a } = await leaderA(t);
    api.fail = () => (clock.now() >= T0 + 4_500 ? 500 : undefined);
    await clock.to(17_000);
    const tries = api.since(4_500).filter((c) => c.includes(' a@'));
    // Still IsLeader and valid by its observed record: each try is an optimistic Update, then a Get.
    t.strictSame(tries, [
      'PUT 500 a@6000',
      'PUT 500 a@8000',
      'PUT 500 a@10000',
      'PUT 500 a@12000',
      'PUT 500 a@14000',
    ]);
    t.equal(a.intervals[0]?.end, T0 + 16_000, 'RenewDeadline (10 s) after the failing poll began');
    t.equal(a.intervals[0]?.endedBy, 'lost');
    await a.stop();
  },
);

t.test(
  'renew: a tick that fell during a slow try is taken at once, later ones on the same ticker (not sliding)',
  async (t) => {
    const { api, clock, a } = await leaderA(t);
    api.fail = () => (clock.now() >= T0 + 4_500 ? 500 : undefined);
    // The first failing try hangs 2.5 s on its Update.
    api.latency = (m) => (m === 'PUT' && clock.now() === T0 + 6_000 ? 2_500 : 0);
    await clock.to(17_000);
    const tries = api.since(4_500).filter((c) => c.includes(' a@'));
    t.strictSame(tries, [
      'PUT 500 a@6000',
      'PUT 500 a@8500',
      'PUT 500 a@10000',
      'PUT 500 a@12000',
      'PUT 500 a@14000',
    ]);
    t.equal(a.intervals[0]?.end, T0 + 16_000);
    await a.stop();
  },
);

t.test(
  'Run/ReleaseOnCancel: a failed renew releases the Lease (holder "", 1 s, fresh times, one Update) and only then does leader work stop',
  async (t) => {
    const { api, clock, logs, a } = await leaderA(t);
    // API errors from 4.5 s; back at 15 s, after the last try (14 s) and before the deadline (16 s).
    api.fail = () => (clock.now() >= T0 + 4_500 && clock.now() < T0 + 15_000 ? 500 : undefined);
    api.latency = (m, spec) => (m === 'PUT' && spec?.holderIdentity === '' ? 300 : 0);
    await clock.to(16_000);
    t.ok(a.leading, 'still at work while the release is in flight');
    await clock.to(16_300);
    t.strictSame(api.since(14_001), ['PUT 200 @16000']);
    t.strictSame(api.lease?.spec, {
      holderIdentity: '',
      leaseDurationSeconds: 1,
      acquireTime: microTime(T0 + 16_000),
      renewTime: microTime(T0 + 16_000),
      leaseTransitions: 0,
    });
    t.equal(a.intervals[0]?.end, T0 + 16_300, 'OnStoppedLeading after release() returned');
    t.equal(a.intervals[0]?.endedBy, 'lost');
    const i = logs.indexOf('a: released the lock');
    t.ok(i >= 0 && i < logs.indexOf('a: leader work ended'), logs.join('\n'));
    await a.stop();
  },
);

t.test(
  'Run/ReleaseOnCancel: with releaseOnStop, stop() cancels the context: the leader releases, then its work stops, and it does not run again',
  async (t) => {
    const { api, clock, a } = await leaderA(t, { releaseOnStop: true });
    api.latency = (m, spec) => (m === 'PUT' && spec?.holderIdentity === '' ? 300 : 0);
    await clock.to(5_000);
    const stopped = a.stop();
    await clock.to(5_300);
    await stopped;
    t.strictSame(api.since(4_001), ['PUT 200 @5000']);
    t.equal(api.lease?.spec?.leaseDurationSeconds, 1);
    t.strictSame(a.intervals, [{ identity: 'a', start: T0, end: T0 + 5_300, endedBy: 'stopped' }]);
    await clock.to(60_000);
    t.strictSame(api.since(5_001), []);
    t.equal(a.runs, 1);
  },
);

t.test(
  'Run: without releaseOnStop (skupper: the context is never cancelled), stop() is a process exit: work ends at once, nothing is written',
  async (t) => {
    const { api, clock, a } = await leaderA(t);
    await clock.to(5_000);
    const stopped = a.stop();
    await clock.to(5_000);
    await stopped;
    t.strictSame(a.intervals, [{ identity: 'a', start: T0, end: T0 + 5_000, endedBy: 'stopped' }]);
    await clock.to(60_000);
    t.strictSame(api.since(4_001), []);
    t.equal(api.lease?.spec?.holderIdentity, 'a');
  },
);

t.test(
  'release: only while the observed record names this candidate: a displaced leader writes nothing',
  async (t) => {
    const { api, clock, a } = await leaderA(t);
    await clock.to(4_500);
    api.write({ ...api.lease!.spec, holderIdentity: 'x', renewTime: microTime(clock.now()) });
    await clock.to(16_000);
    t.equal(a.intervals[0]?.end, T0 + 16_000);
    t.equal(a.intervals[0]?.endedBy, 'lost');
    t.strictSame(
      api.calls.filter((c) => c.holder === ''),
      [],
    );
    t.equal(api.lease?.spec?.holderIdentity, 'x');
    await a.stop();
  },
);

t.test(
  'release: one Update of the cached Lease (its resourceVersion), no Get, no retry: a write it did not see wins',
  async (t) => {
    const { api, clock, a } = await leaderA(t);
    api.fail = () => (clock.now() >= T0 + 4_500 && clock.now() < T0 + 15_000 ? 500 : undefined);
    await clock.to(12_000);
    api.write({ ...api.lease!.spec, holderIdentity: 'b', renewTime: microTime(clock.now()) });
    await clock.to(16_000);
    t.strictSame(api.since(14_001), ['PUT 409 @16000']);
    t.equal(api.lease?.spec?.holderIdentity, 'b');
    t.equal(a.intervals[0]?.end, T0 + 16_000);
    await a.stop();
  },
);

t.test(
  'release: with releaseOnCancel false (client-go’s default) a failed renew writes nothing',
  async (t) => {
    const { api, clock, a } = await leaderA(t, { releaseOnCancel: false });
    api.fail = () => (clock.now() >= T0 + 4_500 && clock.now() < T0 + 15_000 ? 500 : undefined);
    await clock.to(16_000);
    t.strictSame(api.since(14_001), []);
    t.equal(a.intervals[0]?.end, T0 + 16_000);
    await a.stop();
  },
);

t.test(
  'ExponentialBackOff.NextBackOff (cenkalti/backoff v4.3.0 defaults): 0.5 s ±50 %, ×1.5, interval capped at 60 s, never reset',
  async (t) => {
    t.strictSame(SKUPPER_RERUN_BACKOFF, {
      initialMs: 500,
      randomizationFactor: 0.5,
      multiplier: 1.5,
      maxIntervalMs: 60_000,
    });
    const intervals: number[] = [];
    const mid = new ExponentialBackOff(() => 0.5);
    for (let i = 0; i < 15; i++) {
      intervals.push(mid.currentIntervalMs);
      const d = mid.nextBackOffMs();
      t.ok(Math.abs(d - intervals[i]!) < 1e-3, `${d} around ${intervals[i]}`);
    }
    const expected = [500, 750, 1125, 1687.5, 2531.25, 3796.875, 5695.3125, 8542.96875];
    t.strictSame(intervals.slice(0, 8), expected);
    // 28.8 s → 43.2 s (< 60/1.5 = 40 s before), then 60 s for good.
    t.ok(Math.abs(intervals[11]! - 43_248.779296875) < 1e-6);
    t.strictSame(intervals.slice(12), [60_000, 60_000, 60_000]);
    const low = new ExponentialBackOff(() => 0);
    const high = new ExponentialBackOff(() => 0.999999999);
    for (let i = 0; i < 15; i++) {
      t.ok(Math.abs(low.nextBackOffMs() - intervals[i]! / 2) < 1e-3);
      t.ok(Math.abs(high.nextBackOffMs() - intervals[i]! * 1.5) < 1e-3);
    }
  },
);

t.test(
  'runLeaderElection (skupper 2.1.3+/2.2): after a loss the election runs again after the backoff, with a fresh elector, and the backoff is never reset',
  async (t) => {
    const { api, clock, a } = await leaderA(t);
    // Displaced at 4.5 s by a holder that never renews; a reads it at 6 s (409, Get).
    await clock.to(4_500);
    api.write({ ...api.lease!.spec, holderIdentity: 'x', renewTime: microTime(clock.now()) });
    await clock.to(16_000);
    t.equal(a.intervals[0]?.endedBy, 'lost');
    t.equal(a.runs, 1);
    await clock.to(16_501);
    t.equal(a.runs, 2);
    t.ok(Math.abs(a.rerunDelays[0]! - 500) < 1e-3, 'first wait around 0.5 s');
    // The new run starts with a Get: no observed record, so no optimistic Update.
    t.strictSame(api.since(16_001).slice(0, 1), ['GET 200@16500']);
    // Its expiry clock starts at its own first read (16.5 s), not at the old elector's (6 s → 21 s).
    await clock.to(31_000);
    t.equal(a.intervals.length, 1, 'no takeover at 21 s: nothing carried over');
    await clock.to(33_000); // tries every 3.2 s from 16.5 s: … 29.3, 32.5
    t.equal(a.intervals.length, 2);
    t.ok(Math.abs(a.intervals[1]!.start - (T0 + 32_500)) < 1e-3);
    t.equal(api.lease?.spec?.holderIdentity, 'a');
    // Lost again: the next wait is drawn around 0.75 s, not 0.5 s.
    api.write({ ...api.lease!.spec, holderIdentity: 'y', renewTime: microTime(clock.now()) });
    await clock.to(50_000);
    t.equal(a.intervals[1]?.endedBy, 'lost');
    t.equal(a.runs, 3);
    t.ok(Math.abs(a.rerunDelays[1]! - 750) < 1e-3, `${a.rerunDelays}`);
    await a.stop();
  },
);

t.test(
  'runLeaderElection (skupper ≤ 2.1.2, afterLoss "exit"): a lost leader exits (log.Fatalf in OnStoppedLeading)',
  async (t) => {
    const { api, clock, a } = await leaderA(t, { afterLoss: 'exit' });
    await clock.to(4_500);
    api.write({ ...api.lease!.spec, holderIdentity: 'x', renewTime: microTime(clock.now()) });
    await clock.to(60_000);
    t.equal(a.intervals[0]?.end, T0 + 16_000);
    t.equal(a.runs, 1);
    t.ok(a.exited);
    t.strictSame(api.since(16_001), []);
    await a.stop();
  },
);
