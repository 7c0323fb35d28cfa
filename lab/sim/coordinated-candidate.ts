// A coordinated leader-election candidate (KEP-4355): client-go's LeaderElector with
// `Coordinated: true` and the LeaseCandidate object it keeps, for tests against a real
// kube-apiserver whose coordinated leader election controller (feature gate
// CoordinatedLeaderElection) elects the leader. A simulator, not the real program: the election
// logic is transcribed from client-go; the leader's work is only an interval.
//
// Modelled, from kubernetes/client-go v0.37.2 tools/leaderelection:
// - leaderelection.go tryCoordinatedRenew, called by acquire and renew in place of
//   tryAcquireOrRenew (the loops, jitter and deadlines are lease-candidate.ts's, unchanged in
//   v0.37.2): a Get every time (no optimistic fast path); a missing Lease is not created; the
//   expiry clock restarts when the raw record changes; an expired record, or one naming another
//   holder or none, fails the try: a coordinated candidate never takes a Lease, only the
//   controller names a holder. The holder renews (its LeaseDuration; acquireTime, transitions and
//   `strategy` kept) unless `preferredHolder` is set: then it stops renewing ("end of term") and
//   its renew loop ends at RenewDeadline.
// - tryRelease (ReleaseOnCancel): a Get first; nothing unless the observed record names this
//   candidate; holder "", leaseDurationSeconds 1, fresh times, transitions kept, `strategy`
//   dropped (LeaderElectionRecordToLeaseSpec leaves it unset); again on 409 within RenewDeadline.
// - leasecandidate.go: a LeaseCandidate named after the identity in the Lease's namespace
//   (kube-controller-manager: `<hostname>_<uuid>` for both); spec leaseName, binaryVersion,
//   emulationVersion, strategy OldestEmulationVersion, renewTime; an informer on that object; an
//   update whose pingTime is after its renewTime is acked by an Update of renewTime (from the
//   informer's cache: a stale one gets a 409, retried); renewed every 5 min; failures retried
//   after 5 ms · 2^n (the workqueue's per-item limiter, never reset: no Forget on success).
// What the program does around it (exit without release, rerun after a loss) is lease-candidate.ts's.
//
// Left out, and why:
// - The informer's 5-minute resync, the workqueue's 10/s bucket and client-go's client-side QPS:
//   at one LeaseCandidate and a ping every few seconds they never act.
// - Records compared at whole seconds (see lease-candidate.ts): the controller's writes change the
//   holder or the duration, never only a sub-second time.
// - The election controller itself: the real one runs inside the tests' kube-apiserver.
import { type Clock, systemClock } from '../../shared/clock.ts';
import { isApiError } from '../../shared/kube/api-error.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { Informer } from '../../shared/kube/informer.ts';
import { type KubeObject, type Lease, microTime } from '../../shared/kube/types.ts';
import { createLogger } from '../../shared/log.ts';
import { type CandidateOptions, LeaseCandidate, rawRecord, releasedRecord } from './lease-candidate.ts';

export const OLDEST_EMULATION_VERSION = 'OldestEmulationVersion';
/** leasecandidate.go requeueInterval. */
export const CANDIDATE_RENEW_MS = 5 * 60_000;

/** coordination.k8s.io/v1beta1 LeaseCandidate (times are MicroTimes). */
export interface LeaseCandidateObject extends KubeObject {
  spec?: { leaseName?: string; binaryVersion?: string; emulationVersion?: string; strategy?: string } & {
    renewTime?: string | null;
    pingTime?: string | null;
  };
}

type Spec = NonNullable<Lease['spec']>;

/**
 * The informer's UpdateFunc test: pingTime after renewTime. Both are MicroTimes as the API server
 * writes them (RFC 3339, UTC, six fractional digits), so the strings order as the times do.
 */
export const pingPending = (lc: LeaseCandidateObject | undefined): boolean =>
  Boolean(lc?.spec?.pingTime && lc.spec.pingTime > (lc.spec.renewTime ?? ''));

/** leasecandidate.go's LeaseCandidate controller: keeps the object and acks the controller's pings. */
export class CandidateRegistration {
  /** The informer's cache of the one LeaseCandidate (the lister). */
  cached: LeaseCandidateObject | undefined;
  /** Acks and renewals written (Updates), for tests. */
  renewals = 0;
  private readonly o: CoordinatedOptions;
  private readonly clock: Clock;
  private readonly stopped = new AbortController();
  private wake = new AbortController();
  private queued = false;
  private dueAt: number | undefined;
  private failures = 0;
  private synced = false;
  private informer: Informer | undefined;
  private worker: Promise<void> | undefined;

  constructor(o: CoordinatedOptions) {
    this.o = o;
    this.clock = o.clock ?? systemClock;
  }

  get path(): string {
    return `/apis/coordination.k8s.io/v1beta1/namespaces/${this.o.namespace}/leasecandidates`;
  }

  /** Run: the informer (given a client that watches), its first sync, then the worker. */
  start(): void {
    if (this.o.watch)
      this.informer ??= new Informer(this.o.watch, {
        path: this.path,
        fieldSelector: `metadata.name=${this.o.identity}`,
        log: createLogger('lease-candidate-informer', 'silent'),
        clock: this.clock,
        onChange: (objects, ev) => this.observe(objects.values().next().value, ev.type),
      });
    this.informer?.start();
    this.worker ??= this.work();
  }

  async stop(): Promise<void> {
    this.stopped.abort();
    await this.informer?.stop();
    await this.worker;
  }

  /** An informer event: the cache follows; the first sync and every pending ping enqueue. */
  observe(lc: LeaseCandidateObject | undefined, type: string): void {
    const first = type === 'SYNC' && !this.synced;
    if (type === 'SYNC') this.synced = true;
    this.cached = lc;
    if (first || (type !== 'DELETED' && pingPending(lc))) this.enqueue();
  }

  private enqueue(): void {
    this.queued = true;
    this.wake.abort();
  }

  /** processNextWorkItem, forever: ensureLease, then AddAfter 5 min, or AddRateLimited on error. */
  private async work(): Promise<void> {
    const clock = this.clock;
    while (!this.stopped.signal.aborted) {
      if (this.dueAt !== undefined && this.dueAt <= clock.now()) {
        this.dueAt = undefined;
        this.queued = true;
      }
      if (!this.queued) {
        this.wake = new AbortController();
        const until = this.dueAt ?? clock.now() + CANDIDATE_RENEW_MS;
        await clock.sleep(until - clock.now(), AbortSignal.any([this.wake.signal, this.stopped.signal]));
        continue;
      }
      this.queued = false;
      let delay = CANDIDATE_RENEW_MS;
      try {
        await this.ensure();
      } catch (e) {
        if (this.stopped.signal.aborted) return;
        delay = Math.min(5 * 2 ** this.failures++, 1_000_000);
        this.o.log?.('Ensuring lease failed', { name: this.o.identity, err: (e as Error).message });
      }
      // AddAfter keeps the earliest time for a key that is waiting already.
      const at = clock.now() + delay;
      this.dueAt = Math.min(this.dueAt ?? at, at);
    }
  }

  /** ensureLease: create from nothing, else an Update of the cached object with a fresh renewTime. */
  async ensure(): Promise<void> {
    const now = microTime(this.clock.now());
    const opts = { timeoutMs: 10_000, signal: this.stopped.signal };
    const lc = this.cached;
    if (!lc) {
      await this.o.client.create(
        this.path,
        {
          apiVersion: 'coordination.k8s.io/v1beta1',
          kind: 'LeaseCandidate',
          metadata: { name: this.o.identity, namespace: this.o.namespace },
          spec: {
            leaseName: this.o.lease,
            binaryVersion: this.o.binaryVersion ?? '1.37.2',
            emulationVersion: this.o.emulationVersion ?? '1.37.2',
            strategy: OLDEST_EMULATION_VERSION,
            renewTime: now,
          },
        },
        opts,
      );
      return;
    }
    await this.o.client.replace(
      `${this.path}/${this.o.identity}`,
      { ...lc, spec: { ...lc.spec, renewTime: now } },
      opts,
    );
    this.renewals++;
  }
}

export interface CoordinatedOptions extends CandidateOptions {
  /** The LeaseCandidate's versions; default 1.37.2 both (equal versions: the oldest candidate wins). */
  binaryVersion?: string;
  emulationVersion?: string;
  /** A client that lists and watches, for the LeaseCandidate's informer; without one, call observe(). */
  watch?: KubeClient;
}

/** LeaseCandidate with Coordinated: true, and its LeaseCandidate object. */
export class CoordinatedCandidate extends LeaseCandidate {
  readonly registration: CandidateRegistration;

  constructor(opts: CoordinatedOptions) {
    super(opts);
    this.registration = new CandidateRegistration(opts);
  }

  override start(): void {
    this.registration.start();
    super.start();
  }

  /** The process goes: the LeaseCandidate stays (the API server's GC deletes it after 30 min). */
  override async stop(): Promise<void> {
    await Promise.all([this.registration.stop(), super.stop()]);
  }

  private requestOpts(deadline?: number, signal = this.signal) {
    const left = (deadline ?? Number.POSITIVE_INFINITY) - this.clock.now();
    return { timeoutMs: Math.max(1, Math.min(10_000, left)), signal };
  }

  /** tryCoordinatedRenew. */
  protected override async tryAcquireOrRenew(deadline?: number): Promise<boolean> {
    if (this.signal.aborted) return false;
    this.attempts++;
    const now = this.clock.now();
    this.tries.push(now);
    if (this.tries.length > 50) this.tries.shift();
    let old: Lease;
    try {
      old = await this.o.client.get<Lease>(`${this.path}/${this.o.lease}`, this.requestOpts(deadline));
    } catch (e) {
      const msg = isApiError(e, 404) ? 'Lease lock not found' : 'Error retrieving lease lock';
      this.log(msg, { identity: this.identity, err: (e as Error).message });
      return false;
    }
    this.lease = old;
    const spec = old.spec ?? {};
    const raw = rawRecord(spec);
    if (raw !== this.el.observedRaw) {
      this.setObservedRecord(spec);
      this.el.observedRaw = raw;
    }
    if (this.el.observedTime + (spec.leaseDurationSeconds ?? 0) * 1000 < now) return false; // expired
    if (!this.isLeader()) return false;
    if (spec.preferredHolder) {
      this.log("Lease is marked as 'end of term'", {
        identity: this.identity,
        preferred: spec.preferredHolder,
      });
      return false;
    }
    const record: Spec = {
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.round(this.o.leaseDurationMs / 1000),
      acquireTime: spec.acquireTime ?? null,
      renewTime: microTime(now),
      leaseTransitions: spec.leaseTransitions ?? 0,
      ...(spec.strategy ? { strategy: spec.strategy } : {}),
    };
    try {
      await this.update(record, this.requestOpts(deadline));
    } catch (e) {
      this.log('Failed to update lock', { identity: this.identity, err: (e as Error).message });
      return false;
    }
    this.setObservedRecord(record);
    return true;
  }

  /** v0.37.2 release → tryRelease: Get, then (if IsLeader) the released record; again on 409. */
  protected override async release(): Promise<boolean> {
    const deadline = this.clock.now() + this.o.renewDeadlineMs;
    while (this.clock.now() < deadline && !this.exited) {
      const opts = this.requestOpts(deadline, this.proc.signal);
      try {
        this.lease = await this.o.client.get<Lease>(`${this.path}/${this.o.lease}`, opts);
      } catch (e) {
        this.log('error retrieving resource lock', { identity: this.identity, err: (e as Error).message });
        return false;
      }
      if (!this.isLeader()) return true;
      const record = releasedRecord(this.clock.now(), this.lease.spec?.leaseTransitions);
      try {
        await this.update(record, opts);
      } catch (e) {
        if (isApiError(e, 409)) continue;
        this.log('Failed to release lease', { identity: this.identity, err: (e as Error).message });
        return false;
      }
      this.setObservedRecord(record);
      this.log('released the lock', { identity: this.identity });
      return true;
    }
    return false;
  }
}
