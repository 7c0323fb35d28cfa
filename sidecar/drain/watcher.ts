import { HEDGE_AFTER_MS } from '../../shared/kube/client.ts';
import { Informer } from '../../shared/kube/informer.ts';
import type { Node, Pod } from '../../shared/kube/types.ts';
import { ApiHealth } from '../api-health.ts';
import { GuardedWatch } from './guarded-watch.ts';
import {
  type GoingAway,
  goingAwayAsRead,
  goingAwayAsSeen,
  guardedStatusOf,
  isOtherPod,
  newer,
  restartedSince,
} from './own-objects.ts';
import { runtimeId } from './procs.ts';
import { witnessRestart } from './restart-witness.ts';
import { type DrainState, initialDrainState, nodeDrainReason, podTerminating } from './state.ts';
import { drainStateChange, viewNews } from './state-change.ts';
import type { DrainWatcherOptions } from './watcher-options.ts';

/**
 * While the API counts as down, the own Node is read consistently this often until it answers:
 * answers from the watch cache do not count as "up" (servedFromCache), so without a consistent
 * read an idle sidecar would not notice the API is back.
 */
export const PROBE_WHILE_DOWN_MS = 2_000;

/**
 * Watches the own Node and Pod (field selectors: one object each) and publishes DrainState.
 * Shared by every feature; none of them watches the node on its own.
 */
export class DrainWatcher {
  private state: DrainState = initialDrainState;
  private localTerminating = false;
  /** A presumed termination not settled yet: aborts its restart witness. */
  private presumption: AbortController | undefined;
  /** The last hook's presumed termination was disproved by a restart seen here (DrainState). */
  private hookRestartSeen = false;
  /** The guarded container's restartCount when markTerminating() was called. */
  private restartsAtMark: number | undefined;
  /**
   * A stop of the guarded container while the pod stays (a probe failure's restart, a crash)
   * counts as draining until a new container serves (guarded.ts): on for the L2 handover.
   */
  private restartsHandedOver = false;
  private readonly guarded: GuardedWatch;
  private readonly listeners = new Set<(s: DrainState, prev: DrainState) => void>();
  private readonly nodeListeners = new Set<(node: Node | undefined) => void>();
  private readonly nodeInformer: Informer;
  private readonly podInformer: Informer;
  private readonly opts: DrainWatcherOptions;
  node: Node | undefined;
  pod: Pod | undefined;
  /** UID of a pod seen under the own name that is not the own pod (set once, for good). */
  private replacedBy: string | undefined;
  /**
   * A consistent read of the own Node succeeded after the informers' first list: the view is
   * not only the watch cache of an API server that may have lost its etcd (see verify()).
   */
  private verified = false;
  private verifying = false;
  private verifyFailed = false;
  private probing = false;
  /** Whether the API answers (api-health.ts): given, or its own (tests). */
  readonly api: ApiHealth;
  private readonly stopped = new AbortController();

  constructor(opts: DrainWatcherOptions) {
    this.opts = opts;
    this.api =
      opts.api ??
      new ApiHealth({ clock: opts.clock, reopenWatches: (why) => opts.client.reopenWatches?.(why) });
    // While the API counts as down, the own Node is read consistently until it answers.
    this.api.subscribe((h) => {
      if (h.downSince !== undefined) this.probeWhileDown();
    });
    this.guarded = new GuardedWatch({
      clock: opts.clock,
      log: opts.log,
      container: opts.guardedContainer,
      proc: opts.proc,
      signal: this.stopped.signal,
      podGoing: () => this.podGoing(),
      changed: () => this.recompute(),
    });
    const common = { log: opts.log, clock: opts.clock };
    this.nodeInformer = new Informer(opts.client, {
      ...common,
      path: '/api/v1/nodes',
      fieldSelector: `metadata.name=${opts.nodeName}`,
      onChange: (objs, change) => {
        this.node = objs.values().next().value as Node | undefined;
        if (change.type === 'SYNC' || !this.verified) this.verify();
        this.recompute({ fromView: true });
        for (const fn of this.nodeListeners) fn(this.node);
      },
    });
    this.podInformer = new Informer(opts.client, {
      ...common,
      path: `/api/v1/namespaces/${opts.podNamespace}/pods`,
      fieldSelector: `metadata.name=${opts.podName}`,
      onChange: (objs) => {
        const pod = objs.values().next().value as Pod | undefined;
        if (this.isOther(pod)) {
          if (this.replacedBy === undefined)
            this.opts.log.warn(
              { uid: this.opts.podUid, other: pod?.metadata?.uid },
              "another pod has this pod's name (re-created after a force delete): this pod is gone; nothing is done in its name",
            );
          this.replacedBy = pod?.metadata?.uid;
          this.pod = undefined;
        } else if (this.replacedBy === undefined) this.pod = pod;
        this.recompute({ fromView: true });
      },
    });
  }

  get current(): DrainState {
    return this.state;
  }

  /**
   * The Node itself drains (cordoned or tainted, as last seen), not only this pod's guarded
   * container stopping (which `current.draining` counts too).
   */
  get nodeDraining(): boolean {
    return nodeDrainReason(this.node, this.opts.drainTaints, this.opts.drainSignal) !== undefined;
  }

  /** Listeners get every change; call the returned function to unsubscribe. */
  subscribe(fn: (s: DrainState, prev: DrainState) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /**
   * Every change of the own Node as watched, the drain state's or not (its labels: the L2 handover
   * puts back an exclude label removed under its fence); call the returned function to unsubscribe.
   */
  subscribeNode(fn: (node: Node | undefined) => void): () => void {
    this.nodeListeners.add(fn);
    return () => this.nodeListeners.delete(fn);
  }

  start(): void {
    this.nodeInformer.start();
    this.podInformer.start();
  }

  async stop(): Promise<void> {
    this.stopped.abort();
    this.settlePresumption();
    await Promise.all([this.nodeInformer.stop(), this.podInformer.stop()]);
  }

  /** A pod under the own name whose UID is not the own one. */
  private isOther(pod: Pod | undefined): boolean {
    return isOtherPod(pod, this.opts.podUid);
  }

  /**
   * /prestop or SIGTERM: the pod is going away whatever the API says. `presumed`: only presumed so
   * (a hook whose own-Pod read failed, goingAway): a restart of the guarded container seen in the
   * shared PID namespace then disproves it at once (restart-witness.ts), without the API.
   */
  markTerminating(opts: { presumed?: boolean } = {}): void {
    if (!this.localTerminating) this.restartsAtMark = this.guardedStatus()?.restartCount ?? 0;
    const presumed = opts.presumed === true && (!this.localTerminating || this.presumption !== undefined);
    this.localTerminating = true;
    this.hookRestartSeen = false;
    if (presumed) this.presume();
    else this.settlePresumption();
    this.recompute();
  }

  /** A presumed termination: watch for the guarded container's restart (restart-witness.ts). */
  private presume(): void {
    if (this.presumption) return;
    const stop = new AbortController();
    this.presumption = stop;
    const guardedId = runtimeId(this.guardedStatus()?.containerID);
    if (guardedId === undefined) {
      if (this.opts.guardedContainer)
        this.opts.log.info(
          { container: this.opts.guardedContainer },
          'the guarded container is not known yet: a presumed deletion ends only once the own Pod can be read',
        );
      return;
    }
    void witnessRestart({
      guardedId,
      clock: this.opts.clock,
      signal: AbortSignal.any([stop.signal, this.stopped.signal]),
      ...(this.opts.proc ? { proc: this.opts.proc } : {}),
    })
      .then((restarted) => {
        if (this.presumption !== stop) return;
        if (!restarted) {
          if (!stop.signal.aborted)
            this.opts.log.info(
              { container: this.opts.guardedContainer },
              "the guarded container's processes are not visible here (no shared PID namespace): a presumed deletion ends only once the own Pod can be read",
            );
          return;
        }
        this.presumption = undefined;
        // The kubelet started a container: the pod is not being deleted (nor, as last seen, replaced).
        if (podTerminating(this.pod) || this.replacedBy !== undefined) return;
        this.localTerminating = false;
        this.restartsAtMark = undefined;
        this.hookRestartSeen = true;
        this.opts.log.warn(
          { container: this.opts.guardedContainer },
          'the guarded container restarted (seen in the shared PID namespace): the preStop hook taken for a deletion, the own Pod unreadable, was a container restart; no longer terminating',
        );
        this.recompute();
      })
      .catch(() => {});
  }

  /** The termination is certain (SIGTERM, a deletion seen), or over: nothing left to disprove. */
  private settlePresumption(): void {
    this.presumption?.abort();
    this.presumption = undefined;
  }

  /**
   * Whether a preStop hook means the pod is going away. The kubelet also runs preStop when it
   * restarts a container after a failed liveness probe: then neither the pod is being deleted
   * nor the node drained, and nothing must be withdrawn. The own Pod is read fresh (the
   * kubelet's view of a deletion can be ahead of our watch). Unknown (API error) counts as
   * going away, `presumed`: a VIP that moves needlessly is better than one that goes dark, and a
   * restart seen in the shared PID namespace disproves it (markTerminating).
   */
  async goingAway(): Promise<GoingAway> {
    const { drainTaints, drainSignal } = this.opts;
    const seen = goingAwayAsSeen(
      this.node,
      this.pod,
      this.replacedBy !== undefined,
      drainTaints,
      drainSignal,
    );
    if (seen) return seen;
    try {
      const pod = await this.opts.client.get<Pod>(
        `/api/v1/namespaces/${this.opts.podNamespace}/pods/${this.opts.podName}`,
        { timeoutMs: 2_000, hedgeAfterMs: HEDGE_AFTER_MS },
      );
      return goingAwayAsRead(pod, this.opts.podUid);
    } catch (e) {
      return { going: true, why: `own Pod unknown (${(e as Error).message})`, presumed: true };
    }
  }

  /** Set once the features are known: some feature hands over for a guarded container's stop. */
  handOverRestarts(on: boolean): void {
    this.restartsHandedOver = on && this.opts.guardedContainer !== undefined;
    this.recompute();
  }

  /**
   * The preStop hook of a container restart (goingAway() said no): with handOverRestarts, the
   * guarded container counts as stopped from now until a new one serves. False without.
   */
  markGuardedStopping(): boolean {
    const name = this.opts.guardedContainer;
    if (!this.restartsHandedOver || !name) return false;
    this.guarded.stopping(this.guardedStatus(), name);
    this.recompute();
    return true;
  }

  /**
   * After each list of the own Node (the informers list from the watch cache): one consistent GET
   * of it — a single key, read from etcd. Until the first succeeds the view is not "synced": an
   * API server whose etcd member is gone answers from its cache at once with old data, and nothing
   * read only from it is acted on. A Node newer than the list's (the cache behind) replaces it, and
   * the watches are re-opened on new connections (they may sit on that server). A failure is an
   * API failure (the client reports it): probeWhileDown() reads again until one answers.
   */
  private verify(): void {
    if (this.verifying || this.stopped.signal.aborted) return;
    this.verifying = true;
    const { client, nodeName, log } = this.opts;
    void client
      .get<Node>(`/api/v1/nodes/${nodeName}`, {
        timeoutMs: 5_000,
        hedgeAfterMs: HEDGE_AFTER_MS,
        signal: this.stopped.signal,
      })
      .then((fresh) => this.onVerified(fresh))
      .catch((e: unknown) => {
        if (this.stopped.signal.aborted || this.verifyFailed) return;
        this.verifyFailed = true;
        log.warn(
          { err: (e as Error).message },
          'cannot read the own Node consistently (from etcd): the listed view is not trusted until it can be',
        );
      })
      .finally(() => {
        this.verifying = false;
      });
  }

  private onVerified(fresh: Node | undefined): void {
    const seen = this.node?.metadata?.resourceVersion;
    const now = fresh?.metadata?.resourceVersion;
    if (fresh?.metadata && seen !== undefined && now !== undefined && newer(now, seen)) {
      this.opts.log.warn(
        { listed: seen, current: now },
        'the own Node as listed is behind a consistent read (a lagging or stale API server): taking the current one and re-opening the watches',
      );
      this.node = fresh;
      this.api.reopenWatches('the own Node listed behind');
    }
    this.verified = true;
    this.verifyFailed = false;
    this.recompute();
  }

  /** A consistent GET of the own Node every PROBE_WHILE_DOWN_MS while the API counts as down. */
  private probeWhileDown(): void {
    if (this.probing || this.stopped.signal.aborted) return;
    this.probing = true;
    const { clock, client, nodeName } = this.opts;
    const signal = this.stopped.signal;
    void (async () => {
      try {
        while (!this.api.up && !signal.aborted) {
          await clock.sleep(PROBE_WHILE_DOWN_MS, signal);
          if (this.api.up || signal.aborted) break;
          if (!this.verified && this.nodeInformer.hasSynced) {
            this.verify();
            continue;
          }
          // No resourceVersion: read from etcd, so an answer proves the API is up (the client
          // reports it); a failure keeps it down.
          await client.get(`/api/v1/nodes/${nodeName}`, { timeoutMs: 2_000, signal }).catch(() => undefined);
        }
      } catch {
        // stopped
      } finally {
        this.probing = false;
      }
    })();
  }

  private guardedStatus() {
    return guardedStatusOf(this.pod, this.opts.guardedContainer);
  }

  /** Restarted since the mark (restartCount went up) and running again. */
  private guardedRestarted(): boolean {
    return restartedSince(this.guardedStatus(), this.restartsAtMark);
  }

  /** The pod is going away: a hook or SIGTERM said so, it is being deleted, or it was replaced. */
  private podGoing(): boolean {
    return this.localTerminating || podTerminating(this.pod) || this.replacedBy !== undefined;
  }

  private recompute(how: { fromView?: boolean } = {}): void {
    // A hook-set terminating state ends when the guarded container runs again (restarted after
    // the hook) while the pod is not being deleted.
    if (this.localTerminating && !podTerminating(this.pod) && this.guardedRestarted()) {
      this.localTerminating = false;
      this.restartsAtMark = undefined;
      this.settlePresumption();
      this.opts.log.info(
        { container: this.opts.guardedContainer },
        'the guarded container runs again and the pod is not being deleted: no longer terminating',
      );
    }
    if (this.restartsHandedOver) this.guarded.track(this.guardedStatus());
    // A deletion seen settles a presumed one; a drain seen makes the restart seen moot.
    if (this.presumption && podTerminating(this.pod)) this.settlePresumption();
    const drained = nodeDrainReason(this.node, this.opts.drainTaints, this.opts.drainSignal);
    if (drained !== undefined) this.hookRestartSeen = false;
    const stopped = this.guarded.stopped?.why;
    const reason = drained ?? stopped;
    const next: DrainState = {
      draining: reason !== undefined,
      drainReason: reason,
      terminating: this.podGoing(),
      // A Node that is not there (deleted, or not readable) is unknown, never "schedulable".
      synced:
        this.nodeInformer.hasSynced && this.podInformer.hasSynced && this.node !== undefined && this.verified,
      podReplaced: this.replacedBy !== undefined,
      hookRestartSeen: this.hookRestartSeen,
    };
    const prev = this.state;
    const change = drainStateChange(prev, next);
    if (change === 'same') return;
    this.state = next;
    // Before the listeners hear of it: the outage counts from this news (api-health.ts viewNews).
    if (how.fromView && viewNews(prev, next)) this.api.viewNews();
    if (change === 'logged') this.opts.log.info({ drain: next }, 'drain state changed');
    for (const fn of this.listeners) fn(next, prev);
  }
}
