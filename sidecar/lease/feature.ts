// Sidecar feature "lease-handover", the I/O edge of the Lease handover: reads the own pod
// (through the shared drain watcher), candidate pods, nodes and Leases (api.ts); waits for the
// leader container's stop (leader-stop.ts); writes the Lease and verifies the handover on the
// informer's view (views.ts, verify.ts); records Events and metrics (results.ts). Decisions come
// from ./core.ts. Every API call retries with jittered backoff inside a deadline and never throws
// out of the feature: API trouble costs a handover, never the sidecar.
import { retryUntil } from '../../shared/backoff.ts';
import type { IdentityScheme } from '../../shared/contract.ts';
import { isApiError } from '../../shared/kube/api-error.ts';
import { Informer } from '../../shared/kube/informer.ts';
import type { Lease, Pod } from '../../shared/kube/types.ts';
import { terminationDeadline } from '../drain/state.ts';
import { ownPod } from '../events.ts';
import type { Feature, FeatureContext, FeatureFactory } from '../feature.ts';
import { type Metrics, registerMetrics } from '../metrics.ts';
import { LeaseApi } from './api.ts';
import {
  afterConflict,
  decideHandover,
  identityMayBeShared,
  identitySharers,
  isOwnIdentity,
  LEASE_EVENT_REASONS,
  type LeaseRef,
  type LeaseSettings,
  leaseSettings,
  podIdentity,
} from './core.ts';
import { type LeaderStop, LeaderWatch } from './leader-stop.ts';
import { LEASE_METRICS, type LeaseResult, refName } from './results.ts';
import { LeaseVerifier } from './verify.ts';
import { LeaseViews } from './views.ts';

/** Left of the grace period after a given-up handover, for its Event. */
const REPORT_MARGIN_MS = 2_000;

/** One Lease's handover: which Lease, under which settings, since when, until when. */
interface Attempt {
  settings: LeaseSettings;
  ref: LeaseRef;
  key: string;
  stop: LeaderStop;
  deadline: number;
}

/** A write answered 409 while the Lease is still ours (renewed meanwhile): decide again. */
class StillOursConflict extends Error {}

export class LeaseHandover implements Feature {
  readonly name = 'lease-handover';
  private readonly ctx: FeatureContext;
  private readonly settings: LeaseSettings | undefined;
  private readonly informers: Informer[] = [];
  /** Each Lease as its informer shows it. */
  private readonly views = new LeaseViews();
  private unsubscribe: (() => void) | undefined;
  private run: Promise<LeaseResult[]> | undefined;
  /**
   * Terminations that ended with the pod staying (a liveness restart's preStop taken for a
   * deletion: the node drained, or the own Pod was unreadable): the handover of each one is its
   * own, so the real deletion that may follow hands over again (issue 42, item 7).
   */
  private terminationsEnded = 0;
  /** The termination `run` was started for (terminationsEnded when it began). */
  private runFor = -1;
  /** A handover runs and has not finished. */
  private handingOver = false;
  private hinted = false;
  private readonly leader: LeaderWatch;
  private readonly abort = new AbortController();
  private readonly metrics: Metrics<typeof LEASE_METRICS>;
  private readonly api: LeaseApi;
  private readonly verifier: LeaseVerifier;

  constructor(ctx: FeatureContext) {
    this.ctx = ctx;
    const config = ctx.config;
    try {
      this.settings = leaseSettings(
        config.profile,
        {
          leases: config.leases,
          guardedContainer: config.guardedContainer,
          successorSelector: config.successorSelector,
          identityScheme: config.identityScheme,
        },
        config.podNamespace,
      );
    } catch (e) {
      // A configuration error leaves this feature inert, never the sidecar down.
      ctx.log.error({ err: (e as Error).message }, 'lease handover disabled: bad configuration');
    }
    this.metrics = registerMetrics(ctx.metrics, LEASE_METRICS);
    this.api = new LeaseApi(ctx, this.abort.signal);
    this.leader = new LeaderWatch(ctx, this.abort.signal);
    this.verifier = new LeaseVerifier(ctx, this.views, this.metrics, this.abort.signal);
  }

  async start(): Promise<void> {
    const settings = this.settings;
    if (!settings) return;
    for (const ref of settings.leases) {
      const key = refName(ref);
      this.metrics.synced.set({ lease: key }, 0);
      const informer = new Informer(this.ctx.client, {
        path: `/apis/coordination.k8s.io/v1/namespaces/${ref.namespace}/leases`,
        fieldSelector: `metadata.name=${ref.name}`,
        log: this.ctx.log,
        clock: this.ctx.clock,
        onChange: (objs) => {
          const lease = objs.values().next().value as Lease | undefined;
          const was = this.views.get(key);
          this.views.note(key, lease);
          this.metrics.synced.set({ lease: key }, 1);
          const own = this.ownIdentity(settings.identityScheme);
          const mine = isOwnIdentity(lease?.spec?.holderIdentity, own, settings.identityScheme);
          this.metrics.holder.set({ lease: key }, mine ? 1 : 0);
          if (mine !== isOwnIdentity(was?.spec?.holderIdentity, own, settings.identityScheme))
            this.ctx.log.info(
              { lease: key, holder: lease?.spec?.holderIdentity },
              mine ? 'this pod leads' : 'this pod does not lead',
            );
        },
        onError: (err) => {
          this.metrics.synced.set({ lease: key }, 0);
          this.ctx.log.warn(
            { lease: key, code: err.code, err: err.message },
            'cannot read Lease; retrying with backoff',
          );
        },
      });
      this.informers.push(informer);
      informer.start();
    }
    this.unsubscribe = this.ctx.drain.subscribe((state, prev) => {
      if (prev.terminating && !state.terminating) {
        this.terminationsEnded++;
        this.ctx.log.info(
          { handover: this.run ? 'run' : 'none' },
          'no longer terminating (the pod stays): a later termination hands the Lease over again',
        );
      }
      if (state.terminating) this.trigger();
      else if (state.draining && !this.hinted) {
        this.hinted = true;
        void this.hint(state.drainReason ?? 'draining');
      }
    });
    if (this.ctx.drain.current.terminating) this.trigger();
    void this.leader.watch(settings.leaderContainer, () => this.handingOver);
  }

  /**
   * Notes, once a second while the pod runs, whether the leader container's processes are visible
   * here (one PID namespace): then its stop is seen locally at once, where the kubelet would publish
   * it only after this sidecar too has stopped. A restarted leader has a new ID and is looked up again.
   */

  /** /prestop returns at once: the handover waits for the leader container, which /prestop would hold up. */
  async prestop(): Promise<Record<string, unknown>> {
    if (!this.settings) return { disabled: 'bad configuration' };
    this.trigger();
    return { started: true, note: 'Lease handover runs once the leader container has stopped' };
  }

  /** Keeps the process alive (SIGTERM path) until the handover is done or its budget is spent. */
  async stop(): Promise<void> {
    if (this.run) await this.run;
    this.abort.abort();
    this.unsubscribe?.();
    await Promise.all(this.informers.map((i) => i.stop()));
  }

  /** The results of the handover, once triggered (tests and the /prestop summary use it). */
  get result(): Promise<LeaseResult[]> | undefined {
    return this.run;
  }

  /**
   * One handover per termination: none while this one's runs; a termination after one that ended
   * (the pod stayed) starts its own, after any handover still running.
   */
  private trigger(): void {
    const settings = this.settings;
    if (!settings || (this.run && this.runFor === this.terminationsEnded)) return;
    this.runFor = this.terminationsEnded;
    const start = () => {
      const budgetSeconds = this.ctx.config.handoverBudgetSeconds;
      const now = this.ctx.clock.now();
      // Never past the grace period: the kubelet kills the pod then, mid-retry.
      const killAt = terminationDeadline(this.ctx.drain.pod, now, budgetSeconds);
      const deadline = Math.min(now + budgetSeconds * 1000, killAt - REPORT_MARGIN_MS);
      this.handingOver = true;
      return this.handover(settings, deadline)
        .catch((e: unknown) => {
          this.ctx.log.error({ err: (e as Error).message }, 'lease handover failed');
          return [];
        })
        .finally(() => {
          this.handingOver = false;
        });
    };
    this.run = this.run ? this.run.then(start) : start();
  }

  /**
   * This pod's identity under the scheme, from the own Pod as the API shows it (hostNetwork,
   * spec.hostname, long names); before the Pod is read, from the name and node in the environment.
   */
  private ownIdentity(scheme: IdentityScheme): string {
    const config = this.ctx.config;
    const pod: Pod = this.ctx.drain.pod ?? {
      metadata: { name: config.podName },
      spec: { nodeName: config.nodeName },
    };
    return podIdentity(pod, scheme);
  }

  private async hint(reason: string): Promise<void> {
    const settings = this.settings;
    if (!settings) return;
    try {
      const held = settings.leases.filter((r) =>
        isOwnIdentity(
          this.views.get(refName(r))?.spec?.holderIdentity,
          this.ownIdentity(settings.identityScheme),
          settings.identityScheme,
        ),
      );
      if (held.length === 0) return;
      const choice = await this.api.successor(settings, this.ctx.clock.now() + 5_000);
      this.ctx.log.info(
        { reason, leases: held.map(refName), successor: choice.successor, rejected: choice.rejected },
        'node draining: Lease handover prepared; acting when this pod terminates',
      );
    } catch (e) {
      this.ctx.log.warn(
        { err: (e as Error).message },
        'early successor pick failed (will retry at termination)',
      );
    }
  }

  /** The Lease is left to a pod that shares this pod's identity (surge rollout under node-name). */
  private async leftToSharer(key: string, detail: string): Promise<LeaseResult> {
    const msg = `Lease ${key} left alone: ${detail}`;
    this.ctx.log.warn({ lease: key }, msg);
    await this.ctx.events.record(ownPod(this.ctx.config), 'Normal', LEASE_EVENT_REASONS.identityShared, msg);
    return { lease: key, outcome: 'identity-shared', detail: msg };
  }

  private async handover(settings: LeaseSettings, deadline: number): Promise<LeaseResult[]> {
    const config = this.ctx.config;
    const clock = this.ctx.clock;
    this.ctx.log.info(
      { leases: settings.leases.map(refName), container: settings.leaderContainer },
      'pod terminating: Lease handover armed',
    );
    const stopDeadline = Math.min(deadline, clock.now() + config.leaderStopTimeoutSeconds * 1000);
    const stop = await this.leader.waitStopped(settings.leaderContainer, stopDeadline);
    const results = this.ctx.drain.current.podReplaced
      ? this.replacedResults(settings)
      : await Promise.all(settings.leases.map((ref) => this.handoverOne(settings, ref, stop, deadline)));
    for (const r of results) this.metrics.handovers.inc({ lease: r.lease, outcome: r.outcome });
    this.ctx.log.info({ results }, 'Lease handover finished');
    return results;
  }

  /**
   * The own pod was re-created under the same name: a holder with this pod's identity may be the
   * new pod, so no Lease is touched (it expires if it was ours).
   */
  private replacedResults(settings: LeaseSettings): LeaseResult[] {
    const detail = 'own pod re-created under the same name: the holder may be the new pod; Lease left alone';
    this.ctx.log.warn({ leases: settings.leases.map(refName) }, detail);
    return settings.leases.map((ref) => ({ lease: refName(ref), outcome: 'pod-replaced', detail }));
  }

  private async handoverOne(
    settings: LeaseSettings,
    ref: LeaseRef,
    stop: LeaderStop,
    deadline: number,
  ): Promise<LeaseResult> {
    const config = this.ctx.config;
    const key = refName(ref);
    const attempt: Attempt = { settings, ref, key, stop, deadline };
    try {
      if (!stop.stopped) {
        // The fence did not close: a running leader keeps acting for up to its RenewDeadline,
        // so naming a successor now could give two leaders. Let the Lease expire instead.
        const lease = await this.api.read(ref, deadline).catch(() => this.views.get(key));
        const own = this.ownIdentity(settings.identityScheme);
        if (!isOwnIdentity(lease?.spec?.holderIdentity, own, settings.identityScheme))
          return { lease: key, outcome: 'not-holder' };
        const msg = `Lease ${key} left to expire: leader container ${settings.leaderContainer} did not stop within ${config.leaderStopTimeoutSeconds} s`;
        await this.ctx.events.record(ownPod(config), 'Warning', LEASE_EVENT_REASONS.leftToExpire, msg);
        return { lease: key, outcome: 'leader-still-running', detail: msg };
      }
      // A 409 while the Lease is still ours: decide again from a fresh read, backing off.
      return await retryUntil(() => this.decideAndWrite(attempt), {
        deadline,
        retryable: (e) => e instanceof StillOursConflict,
        clock: this.ctx.clock,
        backoff: { baseMs: 100, capMs: 1_000 },
        signal: this.abort.signal,
        what: 'write Lease',
        onRetry: () =>
          this.ctx.log.info({ lease: key }, 'Lease changed under us (409) but still ours: deciding again'),
      });
    } catch (e) {
      const msg = `Lease ${key} not handed over: ${(e as Error).message}; it will expire on its own`;
      this.ctx.log.error({ lease: key, err: (e as Error).message }, msg);
      await this.ctx.events.record(ownPod(config), 'Warning', LEASE_EVENT_REASONS.failed, msg);
      return { lease: key, outcome: 'api-failed', detail: msg };
    }
  }

  /** One read, decision and write of the Lease; throws StillOursConflict to be run again. */
  private async decideAndWrite(attempt: Attempt): Promise<LeaseResult> {
    const { settings, ref, key, stop, deadline } = attempt;
    const config = this.ctx.config;
    const clock = this.ctx.clock;
    const lease = await this.api.read(ref, deadline);
    if (!lease) return { lease: key, outcome: 'lease-missing' };
    const own = this.ownIdentity(settings.identityScheme);
    if (!isOwnIdentity(lease.spec?.holderIdentity, own, settings.identityScheme))
      return {
        lease: key,
        outcome: 'not-holder',
        detail: `held by ${lease.spec?.holderIdentity || 'nobody'}`,
      };
    // Another live pod writing this same identity may be the holder, renewing: never replace or
    // release it (it would lead on, next to the successor, until its RenewDeadline).
    const candidates = await this.api.candidatePods(settings, deadline);
    const sharers = identitySharers(
      config.podName,
      own,
      await this.api.sharerPool(settings, candidates, deadline),
      settings.identityScheme,
    );
    if (sharers.length > 0)
      return await this.leftToSharer(
        key,
        `its holder ${lease.spec?.holderIdentity} is also the identity (${settings.identityScheme}) of ${sharers.join(', ')} on this node, which may be renewing it; that pod leads on, or the Lease expires`,
      );
    const choice = await this.api.successor(settings, deadline, candidates);
    const decision = decideHandover({
      lease,
      identity: own,
      scheme: settings.identityScheme,
      successor: choice.successorPod ? podIdentity(choice.successorPod, settings.identityScheme) : undefined,
      nowMs: clock.now(),
    });
    this.ctx.log.info(
      { lease: key, action: decision.action, why: decision.why, rejected: choice.rejected },
      'Lease handover decision',
    );
    if (decision.action === 'skip') return { lease: key, outcome: 'not-holder', detail: decision.why };
    if (config.observeOnly) {
      const msg = `observe-only: would ${decision.action} Lease ${key} (${decision.why})`;
      await this.ctx.events.record(ownPod(config), 'Normal', LEASE_EVENT_REASONS.observed, msg);
      return {
        lease: key,
        outcome: 'observed',
        detail: msg,
        ...(choice.successor ? { successor: choice.successor } : {}),
      };
    }
    let written: Lease;
    try {
      written = await this.api.write(ref, decision.lease, deadline);
    } catch (e) {
      if (!isApiError(e, 409)) throw e;
      const fresh = await this.api.read(ref, deadline);
      const shareable = identityMayBeShared(this.ctx.drain.pod, settings.identityScheme);
      const next = afterConflict(
        fresh,
        own,
        settings.identityScheme,
        decision.lease,
        shareable ? lease : undefined,
      );
      if (next === 'renewed')
        return await this.leftToSharer(
          key,
          `renewed under this pod's identity ${own} (${settings.identityScheme}) after its leader container stopped: another live pod writes the same identity`,
        );
      if (next === 'landed' && fresh) {
        // A retried write whose first answer was lost: the first one went through.
        this.ctx.log.info({ lease: key }, 'Lease write landed (its answer was lost): verifying');
        return await this.verifier.verify(
          ref,
          decision.action,
          fresh,
          clock.now() - stop.at,
          deadline,
          decision,
        );
      }
      if (next === 'stop') {
        const holder = fresh?.spec?.holderIdentity || 'nobody';
        this.ctx.log.info(
          { lease: key, holder },
          'Lease changed under us (409): holder changed, nothing to do',
        );
        return { lease: key, outcome: 'holder-changed', detail: `now held by ${holder}` };
      }
      throw new StillOursConflict((e as Error).message);
    }
    const writeMs = clock.now() - stop.at;
    return await this.verifier.verify(ref, decision.action, written, writeMs, deadline, decision);
  }
}

export const createFeature: FeatureFactory = (ctx) => new LeaseHandover(ctx);
