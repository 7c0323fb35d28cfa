// A leader-election candidate that follows client-go's tools/leaderelection (LeaseLock)
// step by step: Run = acquire (JitterUntil, sliding) → OnStartedLeading → renew (Until +
// PollImmediateUntil bounded by RenewDeadline) → OnStoppedLeading; like skupper ≥ 2.2 it
// runs again after losing instead of exiting. It logs every interval of leader work, so
// tests can see leaderless windows and split brain (two candidates working at once).
import { type Clock, systemClock } from '../../shared/clock.ts';
import { isApiError, type KubeClient } from '../../shared/kube/client.ts';
import type { Lease } from '../../shared/kube/types.ts';
import { microTime } from '../../shared/kube/types.ts';

export interface CandidateOptions {
  client: KubeClient;
  namespace: string;
  lease: string;
  identity: string;
  /** Defaults are skupper's (and client-go's usual): 15 s / 10 s / 2 s, jitter 1.2. */
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  jitterFactor?: number;
  /** client-go ReleaseOnCancel with a context that is cancelled on stop; skupper never cancels it (default false). */
  releaseOnStop?: boolean;
  clock?: Clock;
  random?: () => number;
  log?: (msg: string, fields: Record<string, unknown>) => void;
}

export interface WorkInterval {
  identity: string;
  start: number;
  /** Undefined while leading. */
  end?: number;
  /** Why the work ended: lost (renew deadline passed) or stopped (process exit). */
  endedBy?: 'lost' | 'stopped';
}

type Spec = NonNullable<Lease['spec']>;

// client-go compares the raw record to decide whether the record "changed" (restarting the expiry clock).
const rawRecord = (s: Spec | undefined) =>
  JSON.stringify([
    s?.holderIdentity ?? '',
    s?.leaseDurationSeconds ?? 0,
    s?.acquireTime ?? '',
    s?.renewTime ?? '',
    s?.leaseTransitions ?? 0,
    s?.strategy ?? '',
    s?.preferredHolder ?? '',
  ]);

export class LeaseCandidate {
  readonly identity: string;
  readonly intervals: WorkInterval[] = [];
  private readonly o: Required<Omit<CandidateOptions, 'log' | 'clock' | 'random'>>;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly log: (msg: string, fields: Record<string, unknown>) => void;
  private readonly abort = new AbortController();
  private observedRecord: Spec | undefined;
  private observedRaw = '';
  private observedTime = 0;
  private lease: Lease | undefined;
  private loop: Promise<void> | undefined;
  /** Calls of tryAcquireOrRenew, for tests. */
  attempts = 0;
  /** Start times (epoch ms) of the last tryAcquireOrRenew calls, newest last. */
  readonly tries: number[] = [];

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
      releaseOnStop: opts.releaseOnStop ?? false,
    };
    this.clock = opts.clock ?? systemClock;
    this.random = opts.random ?? Math.random;
    this.log = opts.log ?? (() => {});
  }

  get leading(): boolean {
    const last = this.intervals.at(-1);
    return last !== undefined && last.end === undefined;
  }

  /** When leader work started the n-th time at or after `since` (epoch ms), if it did. */
  firstWorkSince(since: number): number | undefined {
    return this.intervals.find((i) => i.start >= since)?.start;
  }

  start(): void {
    this.loop ??= this.runForever();
  }

  /** The process exits: leader work ends now; with releaseOnStop a leader releases first. */
  async stop(): Promise<void> {
    const wasLeader = this.isLeader();
    this.endWork('stopped');
    this.abort.abort();
    await this.loop;
    if (this.o.releaseOnStop && wasLeader) await this.release();
  }

  private get path() {
    return `/apis/coordination.k8s.io/v1/namespaces/${this.o.namespace}/leases`;
  }
  private get signal() {
    return this.abort.signal;
  }
  private isLeader(): boolean {
    return this.observedRecord?.holderIdentity === this.identity;
  }
  private setObservedRecord(r: Spec): void {
    this.observedRecord = r;
    this.observedTime = this.clock.now();
  }
  private endWork(by: 'lost' | 'stopped'): void {
    const last = this.intervals.at(-1);
    if (last && last.end === undefined) {
      last.end = this.clock.now();
      last.endedBy = by;
      this.log('leader work ended', { identity: this.identity, by, ms: last.end - last.start });
    }
  }

  private async runForever(): Promise<void> {
    while (!this.signal.aborted) {
      if (!(await this.acquire())) return;
      this.intervals.push({ identity: this.identity, start: this.clock.now() });
      this.log('leader work started (OnStartedLeading)', { identity: this.identity });
      await this.renew();
      if (this.signal.aborted) return;
      this.endWork('lost');
      // skupper ≥ 2.2 (PR #2296): run the election again instead of exiting.
    }
  }

  /** wait.JitterUntil(f, RetryPeriod, 1.2, sliding=true) until f succeeds. */
  private async acquire(): Promise<boolean> {
    while (!this.signal.aborted) {
      if (await this.tryAcquireOrRenew()) return !this.signal.aborted;
      const wait = this.o.retryPeriodMs + this.random() * this.o.jitterFactor * this.o.retryPeriodMs;
      await this.clock.sleep(wait, this.signal);
    }
    return false;
  }

  /** wait.Until(PollImmediateUntil(RetryPeriod, tryAcquireOrRenew, RenewDeadline), RetryPeriod). */
  private async renew(): Promise<void> {
    while (!this.signal.aborted) {
      const deadline = this.clock.now() + this.o.renewDeadlineMs;
      let ok = false;
      for (;;) {
        ok = await this.tryAcquireOrRenew(deadline);
        if (ok || this.signal.aborted) break;
        const left = deadline - this.clock.now();
        if (left <= 0) break;
        await this.clock.sleep(Math.min(this.o.retryPeriodMs, left), this.signal);
        if (this.clock.now() >= deadline) break;
      }
      if (!ok) {
        this.log('failed to renew lease: renew deadline passed', { identity: this.identity });
        return;
      }
      await this.clock.sleep(this.o.retryPeriodMs, this.signal);
    }
  }

  private async tryAcquireOrRenew(deadline?: number): Promise<boolean> {
    if (this.signal.aborted) return false;
    this.attempts++;
    const now = this.clock.now();
    this.tries.push(now);
    if (this.tries.length > 50) this.tries.shift();
    const timeoutMs = Math.max(1, Math.min(10_000, (deadline ?? now + 10_000) - now));
    const record: Spec = {
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.round(this.o.leaseDurationMs / 1000),
      acquireTime: microTime(now),
      renewTime: microTime(now),
      leaseTransitions: 0,
    };
    // 1. obtain or create the election record
    let old: Lease;
    try {
      old = await this.o.client.get<Lease>(`${this.path}/${this.o.lease}`, {
        timeoutMs,
        signal: this.signal,
      });
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
          { timeoutMs, signal: this.signal },
        );
      } catch (e2) {
        this.log('error initially creating leader election record', { err: (e2 as Error).message });
        return false;
      }
      this.setObservedRecord(record);
      return true;
    }
    this.lease = old;
    const oldSpec = old.spec ?? {};
    // 2. record obtained: the expiry clock restarts whenever the record changed
    const raw = rawRecord(oldSpec);
    if (raw !== this.observedRaw) {
      this.setObservedRecord(oldSpec);
      this.observedRaw = raw;
    }
    const nowAfterGet = now;
    if (
      (oldSpec.holderIdentity ?? '') !== '' &&
      this.observedTime + (oldSpec.leaseDurationSeconds ?? 0) * 1000 > nowAfterGet &&
      !this.isLeader()
    )
      return false;
    // 3. update: a renew keeps acquireTime and transitions; a takeover bumps transitions
    if (this.isLeader()) {
      record.acquireTime = oldSpec.acquireTime ?? null;
      record.leaseTransitions = oldSpec.leaseTransitions ?? 0;
    } else record.leaseTransitions = (oldSpec.leaseTransitions ?? 0) + 1;
    try {
      this.lease = await this.o.client.replace<Lease>(
        `${this.path}/${this.o.lease}`,
        { ...old, spec: record },
        { timeoutMs, signal: this.signal },
      );
    } catch (e) {
      this.log('failed to update lock', { identity: this.identity, err: (e as Error).message });
      return false;
    }
    this.setObservedRecord(record);
    return true;
  }

  /** client-go release(): only a leader; holder "", duration 1 s, fresh times, transitions kept. */
  private async release(): Promise<void> {
    if (!this.lease) return;
    const now = microTime(this.clock.now());
    try {
      await this.o.client.replace(
        `${this.path}/${this.o.lease}`,
        {
          ...this.lease,
          spec: {
            holderIdentity: '',
            leaseDurationSeconds: 1,
            acquireTime: now,
            renewTime: now,
            leaseTransitions: this.observedRecord?.leaseTransitions ?? 0,
          },
        },
        { timeoutMs: 5_000 },
      );
    } catch (e) {
      this.log('failed to release lock', { identity: this.identity, err: (e as Error).message });
    }
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
