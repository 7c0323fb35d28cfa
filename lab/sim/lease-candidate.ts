// A leader-election candidate that follows skupper's kube-adaptor, which runs client-go's
// tools/leaderelection on a LeaseLock. It logs every interval of leader work (OnStartedLeading →
// OnStoppedLeading), so tests can see leaderless windows and split brain (two candidates at work).
//
// Modelled, from kubernetes/client-go v0.33.0 tools/leaderelection/leaderelection.go (skupper 2.1.x
// and 2.2.x pin client-go v0.33.0), resourcelock/leaselock.go and apimachinery v0.33.0
// pkg/util/wait:
// - NewLeaderElector's checks: leaseDuration > renewDeadline > JitterFactor·retryPeriod, all > 0.
// - Run: acquire → OnStartedLeading → renew → OnStoppedLeading. OnStoppedLeading is deferred in Run,
//   so it runs after renew() has returned, release() included: leader work ends only then.
// - acquire: wait.JitterUntil(tryAcquireOrRenew, RetryPeriod, JitterFactor 1.2, sliding) until a
//   try succeeds: RetryPeriod + rand·1.2·RetryPeriod after the end of each failed try.
// - renew: wait.Until(PollUntilContextTimeout(RetryPeriod, RenewDeadline, immediate), RetryPeriod):
//   a renew RetryPeriod after the last good one ends; a failed one is retried on a ticker started
//   with the poll (ticks at start + k·RetryPeriod; ticks missed during a slow try are dropped, one is
//   kept) until RenewDeadline from the poll's start, the deadline also bounding each request. When
//   the poll fails or the context is cancelled the loop ends, and with ReleaseOnCancel release() is
//   called then — for any reason the loop ended, a failed renew too (renew(), not a defer in Run).
// - release: only if the observed record names this candidate (IsLeader); one Update of the cached
//   Lease (its resourceVersion from the last Get/Create/Update), no Get, no retry, bounded by
//   RenewDeadline on a context of its own; holder "", leaseDurationSeconds 1, acquire and renew
//   time now, transitions kept. A renew the cancel cut off after the server applied it leaves the
//   cached Lease behind: the release is refused (409) and the Lease expires (the ReleaseOnCancel
//   tests of test/e2e/lease/candidate.test.ts stop the leader between renews, or on purpose in one).
// - tryAcquireOrRenew: (1) the optimistic path (client-go ≥ 0.30): IsLeader() && isLeaseValid(now)
//   (observedTime + the observed record's leaseDurationSeconds after now) → Update of the cached
//   Lease with no Get; on any error fall through to (2) Get, or Create on 404; (3) the observed
//   record and observedTime change only when the raw record read differs from the last one read;
//   held (holder non-empty, valid, not us) → fail; (4) Update: a renew keeps acquireTime and
//   transitions, a takeover adds a transition. Updates send the whole spec (strategy and
//   preferredHolder dropped, as LeaderElectionRecordToLeaseSpec leaves them unset).
// - skupper (skupperproject/skupper internal/kube/adaptor/collector.go runLeaderElection, 2.1.3+
//   and 2.2.x, PR #2296): RunOrDie with ReleaseOnCancel true, 15 s / 10 s / 2 s, a context that
//   is never cancelled; when Run returns (leadership lost) it runs again under
//   backoff.RetryNotify with cenkalti/backoff v4.3.0 NewExponentialBackOff(WithMaxElapsedTime(0)):
//   interval 0.5 s, ×1.5, interval capped at 60 s (the wait is the interval ±50 %, so up to 90 s),
//   never reset. Each run is a new LeaderElector (no observed record, observedTime or reported
//   leader carried over); the LeaseLock, with its cached Lease, is the same object across runs.
//   On SIGTERM the process exits without cancelling that context: no release (stop()).
//   Options give the other behaviours: afterLoss 'exit' (skupper ≤ 2.1.2: log.Fatalf in
//   OnStoppedLeading), releaseOnStop (a program that cancels Run's context on shutdown),
//   releaseOnCancel false (client-go's default).
//
// Out of scope, and why:
// - The raw-record comparison at second precision: client-go marshals the record's times as
//   metav1.Time (RFC 3339, whole seconds), so two records differing only below the second look
//   unchanged. The simulator compares the times as written (microseconds). At skupper's timings
//   successive renews are ≥ RetryPeriod (2 s) apart and always differ in the second; it could
//   only matter for sub-second test timings, where it would shorten an observer's wait by < 1 s.
// - Coordinated leader election (tryCoordinatedRenew, LeaseCandidate, preferredHolder): not used by
//   skupper; coordinated-candidate.ts extends this class with it (client-go v0.37.2).
// - OnNewLeader/maybeReportTransition, events, metrics, the healthz WatchDog: they do not change
//   who writes the Lease or when.
// - client-go's client-side rate limiter (QPS 5, burst 10, shared with the kube-adaptor's other
//   controllers) and HTTP/2 behaviour; acquire's requests have no deadline in client-go (skupper
//   sets no rest.Config Timeout) and are bounded at 10 s here, like the tests' API client.
// - Skupper's own leader work (site collector, flow controller) is only an interval here, and
//   the process's restart by the kubelet after an 'exit' is not simulated.
// - One clock for all candidates and the API server: no clock skew.
import { type Clock, systemClock } from '../../shared/clock.ts';
import { isApiError } from '../../shared/kube/api-error.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import type { Lease } from '../../shared/kube/types.ts';
import { microTime } from '../../shared/kube/types.ts';

/** The API calls a LeaseLock makes; a KubeClient, or a fake in unit tests. */
export type LeaseApi = Pick<KubeClient, 'get' | 'create' | 'replace'>;

export interface CandidateOptions {
  client: LeaseApi;
  namespace: string;
  lease: string;
  identity: string;
  /** Defaults are skupper's (and client-go's usual): 15 s / 10 s / 2 s, jitter 1.2. */
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  jitterFactor?: number;
  /**
   * client-go ReleaseOnCancel: once the renew loop has ended (context cancelled, or a renew that
   * failed), a candidate whose observed record still names it releases the Lease before
   * OnStoppedLeading. Default true: skupper sets it.
   */
  releaseOnCancel?: boolean;
  /**
   * stop() cancels Run's context (so, with releaseOnCancel, a leader releases before its work
   * ends) and the process exits after Run has returned. Default false: skupper never cancels the
   * context, the process exits at once on SIGTERM, leader work ends then, nothing is released.
   */
  releaseOnStop?: boolean;
  /**
   * What the program does when Run returns without a stop (leadership lost): 'rerun' the election
   * with a fresh elector after skupper's backoff (2.1.3+/2.2, default), or 'exit' (≤ 2.1.2).
   */
  afterLoss?: 'rerun' | 'exit';
  clock?: Clock;
  /** Uniform [0, 1): the acquire jitter and the rerun backoff's randomization. */
  random?: () => number;
  log?: (msg: string, fields: Record<string, unknown>) => void;
}

export interface WorkInterval {
  identity: string;
  start: number;
  /** Undefined while leading. */
  end?: number;
  /** Why the work ended: lost (the renew loop failed) or stopped (process exit or cancelled context). */
  endedBy?: 'lost' | 'stopped';
}

type Spec = NonNullable<Lease['spec']>;

/** resourcelock.LeaseSpecToLeaderElectionRecord + json.Marshal: what client-go compares (times as written, see the header). */
/** client-go's release record: holder "", duration 1 s, fresh times, transitions kept. */
export function releasedRecord(nowMs: number, transitions: number | undefined): Spec {
  const now = microTime(nowMs);
  return {
    holderIdentity: '',
    leaseDurationSeconds: 1,
    acquireTime: now,
    renewTime: now,
    leaseTransitions: transitions ?? 0,
  };
}

export const rawRecord = (s: Spec | undefined): string =>
  JSON.stringify([
    s?.holderIdentity ?? '',
    s?.leaseDurationSeconds ?? 0,
    s?.acquireTime ?? '',
    s?.renewTime ?? '',
    s?.leaseTransitions ?? 0,
    s?.strategy ?? '',
    s?.preferredHolder ?? '',
  ]);

/** cenkalti/backoff v4.3.0's defaults (DefaultInitialInterval …), which skupper keeps. */
export const SKUPPER_RERUN_BACKOFF = {
  initialMs: 500,
  randomizationFactor: 0.5,
  multiplier: 1.5,
  maxIntervalMs: 60_000,
} as const;
type BackOffSettings = { -readonly [K in keyof typeof SKUPPER_RERUN_BACKOFF]: number };

/**
 * cenkalti/backoff v4.3.0 ExponentialBackOff as skupper's runLeaderElection builds it
 * (NewExponentialBackOff(WithMaxElapsedTime(0)), used by RetryNotify, which resets it once at the
 * start and never again): NextBackOff returns current·(1 ± 0.5) and then grows current ×1.5, set
 * to MaxInterval once current ≥ MaxInterval / Multiplier.
 */
export class ExponentialBackOff {
  private current: number;
  private readonly random: () => number;
  private readonly o: BackOffSettings;
  constructor(random: () => number = Math.random, o: Partial<BackOffSettings> = {}) {
    this.random = random;
    this.o = { ...SKUPPER_RERUN_BACKOFF, ...o };
    this.current = this.o.initialMs;
  }
  /** The interval the next wait is drawn around (ms). */
  get currentIntervalMs(): number {
    return this.current;
  }
  nextBackOffMs(): number {
    const cur = this.current;
    const delta = this.o.randomizationFactor * cur;
    // getRandomValueFromInterval: min + random·(max − min + 1 ns)
    const next = this.o.randomizationFactor === 0 ? cur : cur - delta + this.random() * (2 * delta + 1e-6);
    this.current =
      cur >= this.o.maxIntervalMs / this.o.multiplier ? this.o.maxIntervalMs : cur * this.o.multiplier;
    return next;
  }
}

/** A LeaderElector's own state: new for every Run (skupper creates a new elector each time). */
interface ElectorState {
  observedRecord: Spec | undefined;
  observedRaw: string;
  observedTime: number;
}
const freshElector = (): ElectorState => ({ observedRecord: undefined, observedRaw: '', observedTime: 0 });

export class LeaseCandidate {
  readonly identity: string;
  readonly intervals: WorkInterval[] = [];
  protected readonly o: Required<Omit<CandidateOptions, 'log' | 'clock' | 'random'>>;
  protected readonly clock: Clock;
  private readonly random: () => number;
  protected readonly log: (msg: string, fields: Record<string, unknown>) => void;
  /** Run's context: cancelled by stop(). */
  private readonly ctx = new AbortController();
  /** The process: gone at once on stop() unless releaseOnStop; a release in flight goes with it. */
  protected readonly proc = new AbortController();
  protected el: ElectorState = freshElector();
  /** The LeaseLock's cached Lease (ll.lease): kept across runs, as skupper reuses one LeaseLock. */
  protected lease: Lease | undefined;
  private readonly backoff: ExponentialBackOff;
  private loop: Promise<void> | undefined;
  /** Calls of tryAcquireOrRenew, for tests. */
  attempts = 0;
  /** Start times (epoch ms) of the last tryAcquireOrRenew calls, newest last. */
  readonly tries: number[] = [];
  /** Runs of the election (Run calls); more than one after a loss with afterLoss 'rerun'. */
  runs = 0;
  /** The waits (ms) drawn from the rerun backoff, in order. */
  readonly rerunDelays: number[] = [];

  constructor(opts: CandidateOptions) {
    this.identity = opts.identity;
    this.o = {
      client: opts.client,
      namespace: opts.namespace,
      lease: opts.lease,
      identity: opts.identity,
      leaseDurationMs: opts.leaseDurationMs ?? 15_000,
      renewDeadlineMs: opts.renewDeadlineMs ?? 10_000,
      retryPeriodMs: opts.retryPeriodMs ?? 2_000,
      jitterFactor: opts.jitterFactor ?? 1.2,
      releaseOnCancel: opts.releaseOnCancel ?? true,
      releaseOnStop: opts.releaseOnStop ?? false,
      afterLoss: opts.afterLoss ?? 'rerun',
    };
    // NewLeaderElector's checks (RunOrDie panics on them).
    const { leaseDurationMs: ld, renewDeadlineMs: rd, retryPeriodMs: rp, jitterFactor: jf } = this.o;
    if (ld <= rd) throw new Error('leaseDuration must be greater than renewDeadline');
    if (rd <= jf * rp) throw new Error('renewDeadline must be greater than retryPeriod*JitterFactor');
    if (ld < 1 || rd < 1 || rp < 1)
      throw new Error('leaseDuration, renewDeadline and retryPeriod must be positive');
    this.clock = opts.clock ?? systemClock;
    this.random = opts.random ?? Math.random;
    this.log = opts.log ?? (() => {});
    this.backoff = new ExponentialBackOff(this.random);
  }

  get leading(): boolean {
    const last = this.intervals.at(-1);
    return last !== undefined && last.end === undefined;
  }

  /** The program has ended: stopped, or exited after a loss (afterLoss 'exit'). */
  get exited(): boolean {
    return this.proc.signal.aborted;
  }

  /** When leader work started the n-th time at or after `since` (epoch ms), if it did. */
  firstWorkSince(since: number): number | undefined {
    return this.intervals.find((i) => i.start >= since)?.start;
  }

  start(): void {
    this.loop ??= this.runForever();
  }

  /**
   * The process is told to stop. Default (skupper): it exits at once — leader work ends now, requests
   * in flight are dropped, nothing is released. releaseOnStop: Run's context is cancelled, Run winds
   * down (release with releaseOnCancel, then OnStoppedLeading), then the process exits.
   */
  async stop(): Promise<void> {
    if (this.o.releaseOnStop && !this.exited) {
      this.ctx.abort();
      await this.loop;
      this.proc.abort();
      return;
    }
    this.endWork('stopped');
    this.proc.abort();
    this.ctx.abort();
    await this.loop;
  }

  protected get path() {
    return `/apis/coordination.k8s.io/v1/namespaces/${this.o.namespace}/leases`;
  }
  protected get signal() {
    return this.ctx.signal;
  }
  /** IsLeader: the last observed record names this candidate. */
  protected isLeader(): boolean {
    return this.el.observedRecord?.holderIdentity === this.identity;
  }
  /** isLeaseValid: observedTime + the observed record's duration is after now. */
  private isLeaseValid(now: number): boolean {
    return this.el.observedTime + (this.el.observedRecord?.leaseDurationSeconds ?? 0) * 1000 > now;
  }
  protected setObservedRecord(r: Spec): void {
    this.el.observedRecord = r;
    this.el.observedTime = this.clock.now();
  }
  private startWork(): void {
    this.intervals.push({ identity: this.identity, start: this.clock.now() });
    this.log('leader work started (OnStartedLeading)', { identity: this.identity });
  }
  private endWork(by: 'lost' | 'stopped'): void {
    const last = this.intervals.at(-1);
    if (last && last.end === undefined) {
      last.end = this.clock.now();
      last.endedBy = by;
      this.log('leader work ended', { identity: this.identity, by, ms: last.end - last.start });
    }
  }

  /** skupper's runLeaderElection: backoff.RetryNotify(RunOrDie, ExponentialBackOff, notify), forever. */
  private async runForever(): Promise<void> {
    for (;;) {
      await this.run();
      if (this.signal.aborted || this.exited) return;
      // Run returned on its own: leadership was lost (acquire only gives up when cancelled).
      if (this.o.afterLoss === 'exit') {
        this.log('lost leader lock: exiting', { identity: this.identity });
        this.proc.abort();
        return;
      }
      const delay = this.backoff.nextBackOffMs();
      this.rerunDelays.push(delay);
      this.log('leader election failed. retrying after delay', { identity: this.identity, delayMs: delay });
      await this.clock.sleep(delay, this.signal);
      if (this.signal.aborted) return;
    }
  }

  /** LeaderElector.Run, with a new elector: OnStoppedLeading (deferred) after renew and release. */
  private async run(): Promise<void> {
    this.runs++;
    this.el = freshElector();
    if (!(await this.acquire())) return;
    if (this.exited) return;
    this.startWork();
    await this.renew();
    if (this.exited) return;
    if (this.o.releaseOnCancel) await this.release();
    if (this.exited) return;
    this.endWork(this.signal.aborted ? 'stopped' : 'lost');
  }

  /** acquire: wait.JitterUntil(tryAcquireOrRenew, RetryPeriod, 1.2, sliding) until a try succeeds. */
  private async acquire(): Promise<boolean> {
    while (!this.signal.aborted) {
      if (await this.tryAcquireOrRenew()) return true;
      const wait = this.o.retryPeriodMs + this.random() * this.o.jitterFactor * this.o.retryPeriodMs;
      await this.clock.sleep(wait, this.signal);
    }
    return false;
  }

  /**
   * renew: wait.Until(f, RetryPeriod) with f = PollUntilContextTimeout(RetryPeriod, RenewDeadline,
   * immediate=true, tryAcquireOrRenew): a non-sliding ticker and a deadline, both from f's start.
   */
  private async renew(): Promise<void> {
    const period = this.o.retryPeriodMs;
    while (!this.signal.aborted) {
      const t0 = this.clock.now();
      const deadline = t0 + this.o.renewDeadlineMs;
      let tick = t0 + period;
      let ok = await this.tryAcquireOrRenew(deadline);
      while (!ok && !this.signal.aborted) {
        // A tick that fell while the try ran is taken at once; later ones were dropped.
        const at = Math.max(tick, this.clock.now());
        if (at >= deadline) {
          await this.clock.sleep(deadline - this.clock.now(), this.signal);
          break;
        }
        await this.clock.sleep(at - this.clock.now(), this.signal);
        if (this.signal.aborted || this.clock.now() >= deadline) break;
        const now = this.clock.now();
        tick = t0 + (Math.floor((now - t0) / period) + 1) * period;
        ok = await this.tryAcquireOrRenew(deadline);
      }
      if (!ok) {
        if (this.exited) return;
        this.log('failed to renew lease', {
          identity: this.identity,
          why: this.signal.aborted ? 'context canceled' : 'renew deadline passed',
        });
        return;
      }
      await this.clock.sleep(period, this.signal);
    }
  }

  /** LeaseLock.Update: the cached Lease with the new spec; the answer becomes the cache. */
  protected async update(spec: Spec, opts: { timeoutMs: number; signal: AbortSignal }): Promise<void> {
    if (!this.lease) throw new Error('lease not initialized, call get or create first');
    this.lease = await this.o.client.replace<Lease>(
      `${this.path}/${this.o.lease}`,
      { ...this.lease, spec },
      opts,
    );
  }

  protected async tryAcquireOrRenew(deadline?: number): Promise<boolean> {
    if (this.signal.aborted) return false;
    this.attempts++;
    const now = this.clock.now();
    this.tries.push(now);
    if (this.tries.length > 50) this.tries.shift();
    const opts = () => ({
      timeoutMs: Math.max(1, Math.min(10_000, (deadline ?? Number.POSITIVE_INFINITY) - this.clock.now())),
      signal: this.signal,
    });
    const record: Spec = {
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.round(this.o.leaseDurationMs / 1000),
      acquireTime: microTime(now),
      renewTime: microTime(now),
      leaseTransitions: 0,
    };
    // 1. fast path: the leader updates optimistically, assuming its observed record is current.
    if (this.isLeader() && this.isLeaseValid(now)) {
      const observed = this.el.observedRecord!;
      record.acquireTime = observed.acquireTime ?? null;
      record.leaseTransitions = observed.leaseTransitions ?? 0;
      try {
        await this.update(record, opts());
        this.setObservedRecord(record);
        return true;
      } catch (e) {
        this.log('failed to update lock optimistically, falling back to slow path', {
          identity: this.identity,
          err: (e as Error).message,
        });
      }
    }
    // 2. obtain or create the election record
    let old: Lease;
    try {
      old = await this.o.client.get<Lease>(`${this.path}/${this.o.lease}`, opts());
    } catch (e) {
      if (!isApiError(e, 404)) {
        this.log('error retrieving resource lock', { identity: this.identity, err: (e as Error).message });
        return false;
      }
      try {
        this.lease = await this.o.client.create<Lease>(
          this.path,
          {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name: this.o.lease, namespace: this.o.namespace },
            spec: record,
          },
          opts(),
        );
      } catch (e2) {
        this.log('error initially creating leader election record', {
          identity: this.identity,
          err: (e2 as Error).message,
        });
        return false;
      }
      this.setObservedRecord(record);
      return true;
    }
    this.lease = old;
    const oldSpec = old.spec ?? {};
    // 3. record obtained: the expiry clock restarts whenever the record changed
    const raw = rawRecord(oldSpec);
    if (raw !== this.el.observedRaw) {
      this.setObservedRecord(oldSpec);
      this.el.observedRaw = raw;
    }
    if ((oldSpec.holderIdentity ?? '') !== '' && this.isLeaseValid(now) && !this.isLeader()) return false;
    // 4. update: a renew keeps acquireTime and transitions; a takeover bumps transitions
    if (this.isLeader()) {
      record.acquireTime = oldSpec.acquireTime ?? null;
      record.leaseTransitions = oldSpec.leaseTransitions ?? 0;
    } else record.leaseTransitions = (oldSpec.leaseTransitions ?? 0) + 1;
    try {
      await this.update(record, opts());
    } catch (e) {
      this.log('failed to update lock', { identity: this.identity, err: (e as Error).message });
      return false;
    }
    this.setObservedRecord(record);
    return true;
  }

  /**
   * release: only if IsLeader; one Update (no Get, no retry) of the cached Lease, on a context of its
   * own bounded by RenewDeadline: holder "", duration 1 s, fresh times, transitions kept.
   */
  protected async release(): Promise<boolean> {
    if (!this.isLeader()) return true;
    const record = releasedRecord(this.clock.now(), this.el.observedRecord?.leaseTransitions);
    try {
      await this.update(record, { timeoutMs: this.o.renewDeadlineMs, signal: this.proc.signal });
    } catch (e) {
      this.log('failed to release lock', { identity: this.identity, err: (e as Error).message });
      return false;
    }
    this.setObservedRecord(record);
    this.log('released the lock', { identity: this.identity });
    return true;
  }
}

/** Pairs of intervals of different candidates that overlap in time: split brain. */
export function splitBrain(all: readonly WorkInterval[], nowMs: number): [WorkInterval, WorkInterval][] {
  const out: [WorkInterval, WorkInterval][] = [];
  for (let i = 0; i < all.length; i++)
    for (let j = i + 1; j < all.length; j++) {
      const a = all[i]!;
      const b = all[j]!;
      if (a.identity === b.identity) continue;
      if (a.start < (b.end ?? nowMs) && b.start < (a.end ?? nowMs)) out.push([a, b]);
    }
  return out;
}
