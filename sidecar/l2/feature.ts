// The I/O edge of the L2 handover: has an observation assembled (observer.ts: drain state, the
// Node, MetalLB's view, the candidates, the node's fence and links), runs the pure core
// (handover/) and has its actions carried out (actions.ts: label, fence, Events), then publishes
// the status annotation (status-publisher.ts). Everything it writes is idempotent; everything it
// needs after a restart is read back from the Node and nft (read-back.ts). What it reads goes
// through three narrow views (api-views.ts) — MetalLB (metallb-view.ts), the candidates
// (candidates.ts) and the node (host.ts); its tick loop's other tasks are named in side-tasks.ts.
import { EXCLUDE_LABEL } from '../../shared/names.ts';
import { Coalescer } from '../coalesce.ts';
import type { Feature, FeatureContext, FeatureFactory } from '../feature.ts';
import { PeriodicTasks } from '../periodic.ts';
import { L2Actions } from './actions.ts';
import { apiViews, type L2ViewsFactory } from './api-views.ts';
import type { CandidateView } from './candidate-view.ts';
import type { FenceSpec } from './fence.ts';
import {
  failsafeDue,
  initialMemory,
  type L2Memory,
  type L2Settings,
  needsTick,
  PUBLISHED_PHASE,
  settled,
  statusOf,
  step,
  vipsOf,
} from './handover/index.ts';
import type { L2Host } from './host.ts';
import type { MetalLbView } from './metallb-view.ts';
import { L2Observer } from './observer.ts';
import { OwnNode } from './own-node.ts';
import { readBack } from './read-back.ts';
import { HeldEvents, L2Metrics } from './reporting.ts';
import { l2SideTasks } from './side-tasks.ts';
import { StatusPublisher } from './status-publisher.ts';

/** Phases in which no handover is under way (one may start: read what it needs fresh). */
const AT_REST = new Set<L2Memory['phase']>(['idle', 'undoing', 'refused', 'given-up']);
/** Phases that are fenced: the candidates no longer matter. */
const FENCED = new Set<L2Memory['phase']>(['fenced-confirmed', 'fenced-unconfirmed', 'failsafe-fenced']);

export class L2Handover implements Feature {
  readonly name = 'l2-handover';
  private readonly ctx: FeatureContext;
  private readonly settings: L2Settings;
  private readonly metallb: MetalLbView;
  private readonly candidates: CandidateView;
  private readonly host: L2Host;
  private memory: L2Memory;
  /**
   * The memory whose actions have all been carried out (its fence installed and read back). The
   * memory is the step's decision, set before its actions run: /prestop answers on this one, or
   * the hook said "fenced" while nft was still committing (CI: an empty ruleset after the answer).
   */
  private effected: L2Memory | undefined;
  private readonly onEffected = new Set<() => void>();
  /** The fence installed now, as last read back from nft. */
  private fence: FenceSpec | undefined;
  private readonly node: OwnNode;
  private readonly actions: L2Actions;
  private readonly status: StatusPublisher;
  private readonly events: HeldEvents;
  private readonly metrics: L2Metrics;
  private readonly abort = new AbortController();
  private readonly reconciler: Coalescer;
  private loop: Promise<void> | undefined;
  private init: Promise<void> | undefined;
  private unsubscribe: (() => void) | undefined;
  /** When the drain state last turned to draining or terminating (the handover's start is logged against it). */
  private drainSeenAt: number | undefined;
  private unsubscribeNode: (() => void) | undefined;
  /** What the tick loop does besides asking for a reconcile (sideTasks). */
  private readonly periodic: PeriodicTasks;
  /** Abandons the API I/O the running reconcile awaits (abandonPassForFailsafe). */
  private passAbort: AbortController | undefined;
  /** Logged once per episode of "mid-handover, but the drain state is not known". */
  private heldUnsynced = false;
  private readonly observer: L2Observer;

  constructor(ctx: FeatureContext, views: L2ViewsFactory = apiViews) {
    this.ctx = ctx;
    const c = ctx.config;
    this.settings = {
      handoverBudgetMs: c.handoverBudgetSeconds * 1000,
      settleMs: c.l2SettleSeconds * 1000,
      failsafeGraceMs: c.failsafeGraceSeconds * 1000,
      memberlistPorts: c.memberlistPorts,
      nodeName: c.nodeName,
    };
    this.memory = initialMemory(ctx.clock.now());
    this.reconciler = new Coalescer(
      async () => {
        try {
          await this.reconcile();
        } catch (e) {
          ctx.log.error({ err: (e as Error).message }, 'L2 reconcile failed; retrying');
        }
      },
      () => this.abort.signal.aborted,
    );
    const { metallb, candidates, host } = views(ctx, (reason) => this.trigger(reason));
    this.metallb = metallb;
    this.candidates = candidates;
    this.host = host;
    this.node = new OwnNode(ctx);
    this.events = new HeldEvents(ctx);
    this.metrics = new L2Metrics(ctx);
    this.actions = new L2Actions(
      ctx,
      { node: this.node, host, events: this.events, metrics: this.metrics },
      (fence) => {
        this.fence = fence;
      },
    );
    const parts = {
      ctx,
      settings: this.settings,
      metallb,
      candidates,
      host,
      node: this.node,
      events: this.events,
      memory: () => this.memory,
      fence: () => this.fence,
      simulatedLabel: () => this.actions.simulatedLabel,
      atRestIdle: () => this.atRestIdle(),
    };
    this.observer = new L2Observer(parts);
    this.status = new StatusPublisher(
      ctx,
      this.node,
      () => ({
        status: JSON.stringify({
          ...statusOf(this.memory, ctx.config.observeOnly),
          ...this.observer.missingField(),
        }),
        idle: this.memory.phase === 'idle',
      }),
      () => this.abort.signal.aborted,
    );
    const rereadFence = async () => {
      this.fence = await host.readFence().catch(() => this.fence);
    };
    this.periodic = new PeriodicTasks(ctx.clock, l2SideTasks({ ...parts, rereadFence }), (task, e) =>
      ctx.log.debug({ task, err: (e as Error).message }, 'periodic task failed'),
    );
  }

  /** The core's memory (tests). */
  get state(): L2Memory {
    return this.memory;
  }

  /** Asks for a reconcile (coalesced with any already asked for). */
  trigger(reason: string): void {
    this.abandonPassForFailsafe();
    this.reconciler.request(reason);
  }

  /**
   * A reconcile awaits API reads and writes: the candidates' lists (up to WIDE_READ's 10 s), the
   * narrow reads and the label, each with retries. On a path that drops packets (not refused) they
   * end only at their timeouts, and the fail-safe would be decided after them, seconds past its
   * grace. Once it is due, they are abandoned and the next reconcile decides at once.
   */
  private abandonPassForFailsafe(): void {
    const pass = this.passAbort;
    if (!pass || pass.signal.aborted || !this.failsafeDueNow()) return;
    this.ctx.log.warn(
      { apiDownSince: this.ctx.api.downSince },
      "fail-safe due: the reconcile's API requests abandoned",
    );
    pass.abort();
  }

  private failsafeDueNow(): boolean {
    const drain = this.ctx.drain.current;
    return failsafeDue(
      this.memory,
      {
        now: this.ctx.clock.now(),
        draining: drain.draining,
        terminating: drain.terminating,
        apiDownSince: this.ctx.api.downSince,
        otherCandidates: this.candidates.others,
      },
      this.settings,
    );
  }

  /** Resolves once started and no reconcile is running (tests). */
  async idle(): Promise<void> {
    await this.init;
    await this.reconciler.idle();
    await this.status.idle();
  }

  async start(): Promise<void> {
    const { ctx } = this;
    // Local state first (no API needed); readiness must never wait for the API.
    this.fence = await this.host.readFence().catch((e: unknown) => {
      ctx.log.error({ err: (e as Error).message }, 'cannot read the nft fence table; assuming none');
      return undefined;
    });
    this.init = this.resumeAndRun();
  }

  private async resumeAndRun(): Promise<void> {
    const { ctx } = this;
    this.memory = await readBack(ctx, this.node, this.events, () => this.fence);
    if (!this.atRestIdle())
      ctx.log.info(
        { phase: PUBLISHED_PHASE[this.memory.phase], fence: this.fence },
        'resuming L2 handover from Node annotation and nft',
      );
    await this.metallb.checkCrd();
    // The fail-safe drops only what MetalLB's pools hold: know them before an outage.
    // Not awaited: a start during an outage must not wait for the read's retries.
    this.periodic.ranNow('pools-read');
    void this.candidates.readPools?.();
    const unsubscribeDrain = ctx.drain.subscribe((next, prev) => {
      if ((next.draining || next.terminating) && !(prev.draining || prev.terminating))
        this.drainSeenAt = ctx.clock.now();
      this.trigger('drain state changed');
    });
    const unsubscribeApi = ctx.api.subscribe((h) =>
      this.trigger(h.downSince === undefined ? 'the API answers again' : 'the API counts as down'),
    );
    this.unsubscribe = () => {
      unsubscribeDrain();
      unsubscribeApi();
    };
    // Fenced, an exclude label removed is put back at once (label-guard.ts), not at the next tick.
    let labelled = EXCLUDE_LABEL in (ctx.drain.node?.metadata?.labels ?? {});
    this.unsubscribeNode = ctx.drain.subscribeNode((n) => {
      const now = EXCLUDE_LABEL in (n?.metadata?.labels ?? {});
      if (now !== labelled || (!now && FENCED.has(this.memory.phase)))
        this.trigger(now ? 'exclude label added' : 'exclude label removed');
      labelled = now;
    });
    this.loop = this.tickLoop();
    this.trigger('started');
  }

  async prestop(): Promise<Record<string, unknown>> {
    const started = this.ctx.clock.now();
    await this.init;
    this.trigger('prestop');
    const outcome = !(await this.settledOnHost(this.settings.handoverBudgetMs))
      ? 'budget-spent'
      : this.memory.phase === 'refused'
        ? 'no-other-node'
        : this.memory.phase === 'failsafe-fenced'
          ? 'failsafe-fenced'
          : 'handed-over';
    const s = statusOf(this.memory, this.ctx.config.observeOnly);
    return {
      outcome,
      phase: s.phase,
      vips: s.vips,
      handedTo: s.handedTo,
      fenced: s.fenced,
      interfaces: s.interfaces,
      ...this.observer.missingField(),
      waitedMs: this.ctx.clock.now() - started,
      ...(this.ctx.config.observeOnly ? { observeOnly: true } : {}),
    };
  }

  /**
   * Whether the handover settled (schedule.ts) and its actions are carried out, within `budgetMs`;
   * false at the budget or once the feature stops.
   */
  private async settledOnHost(budgetMs: number): Promise<boolean> {
    const done = () => this.effected === this.memory && settled(this.memory);
    if (done()) return true;
    const over = new AbortController();
    const signal = AbortSignal.any([over.signal, this.abort.signal]);
    let wake = () => {};
    try {
      return await Promise.race([
        new Promise<boolean>((resolve) => {
          wake = () => done() && resolve(true);
          this.onEffected.add(wake);
        }),
        this.ctx.clock.sleep(budgetMs, signal).then(() => false),
      ]);
    } finally {
      this.onEffected.delete(wake);
      over.abort();
    }
  }

  /** A restart's preStop hook: the drain state says "stopped"; the same wait as a deletion's. */
  restarting(): Promise<Record<string, unknown>> {
    return this.prestop();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.init;
    this.unsubscribe?.();
    this.unsubscribeNode?.();
    await this.metallb.stop();
    await this.loop;
    await this.reconciler.idle();
    await this.status.idle();
    // After the last reconcile: none starts a watch again.
    await this.candidates.release?.();
  }

  // --- the reconcile loop ----------------------------------------------------------------

  private async tickLoop(): Promise<void> {
    const { clock } = this.ctx;
    while (!this.abort.signal.aborted) {
      const drain = this.ctx.drain.current;
      await clock.sleep(
        needsTick(this.memory, { ...drain, apiDownSince: this.ctx.api.downSince }) ? 100 : 1000,
        this.abort.signal,
      );
      this.abandonPassForFailsafe();
      await this.periodic.runDue();
      this.trigger('tick');
    }
  }

  private async reconcile(): Promise<void> {
    const pass = new AbortController();
    this.passAbort = pass;
    try {
      await this.reconcileOnce(pass.signal);
    } finally {
      this.passAbort = undefined;
    }
  }

  private async reconcileOnce(signal: AbortSignal): Promise<void> {
    const { clock } = this.ctx;
    const passStart = clock.now();
    const drain = this.ctx.drain.current;
    const handoverWanted = drain.draining || drain.terminating;
    const { phase } = this.memory;
    // Read wide only around a handover: listed once at its start, then watched until it is
    // fenced, so a node excluded meanwhile is seen before the fence (candidates.ts).
    // A handover about to start waits for a current view. A refused one keeps the watches and
    // is decided again on every reconcile from what they show (no re-list: a Node or speaker
    // becoming eligible arrives as a watch event). A given-up one (not retried until the drain
    // ends, unless the pod goes away) and a fenced one need no candidates: the watches stop.
    // After a fail-safe, once the API answers, the handover is decided again from a new list.
    const failsafeOver = phase === 'failsafe-fenced' && this.ctx.api.up;
    // The fail-safe due: decided now, with what is known (abandonPassForFailsafe).
    const reading = !this.failsafeDueNow();
    if (reading && this.wantsCandidates(phase)) {
      const services = [...this.memory.services, ...this.observer.metallbView().announced];
      await this.candidates.refresh(
        phase === 'idle' || phase === 'undoing' || failsafeOver,
        services,
        (s) => this.metallb.isLocal(s),
        phase === 'refused',
        signal,
      );
    } else if (reading) await this.candidates.release?.();
    const candidatesMs = clock.now() - passStart;
    if (
      reading &&
      handoverWanted &&
      (AT_REST.has(phase) || failsafeOver) &&
      this.metallb.statusSource() === 'services'
    )
      await this.metallb.readAllServices(signal);
    this.metallb.retryUnreadServices();
    const before = this.memory;
    const observation = await this.observer.observe();
    const observedMs = clock.now() - passStart;
    const { memory, actions } = step(this.memory, observation, this.settings);
    this.memory = memory;
    const holding = !observation.synced && PUBLISHED_PHASE[memory.phase] !== 'idle';
    // Routine for a moment after every restart; worth a warning while the API is down.
    if (holding && !this.heldUnsynced)
      this.ctx.log[observation.apiDownSince === undefined ? 'info' : 'warn'](
        {
          phase: PUBLISHED_PHASE[memory.phase],
          fence: memory.fence !== undefined,
          apiDownSince: observation.apiDownSince,
        },
        'drain state unknown (API view not synced or own Node missing): L2 handover state kept as is',
      );
    this.heldUnsynced = holding;
    let carriedOut = true;
    const actStart = clock.now();
    for (const a of actions) carriedOut = (await this.actions.execute(a, signal)) && carriedOut;
    const actedMs = clock.now() - actStart;
    if (carriedOut) {
      this.effected = memory;
      for (const wake of this.onEffected) wake();
    }
    // Fenced or given up by this step: the watches stop now, not a reconcile later.
    if (!this.wantsCandidates(memory.phase)) await this.candidates.release?.();
    const from = PUBLISHED_PHASE[before.phase];
    const to = PUBLISHED_PHASE[memory.phase];
    if (from !== to) {
      // A handover's start: where the time since the drain was seen went (the reads it waited for).
      const started =
        from === 'idle' && this.drainSeenAt !== undefined
          ? {
              sinceDrainSeenMs: clock.now() - this.drainSeenAt,
              passMs: clock.now() - passStart,
              candidatesMs,
              observedMs,
              actedMs,
            }
          : {};
      this.ctx.log.info({ from, to, vips: vipsOf(memory.services), ...started }, 'L2 phase');
      if (to === 'fenced' && memory.handoverStartedAt !== undefined)
        this.metrics.fenced(this.ctx.clock.now() - memory.handoverStartedAt);
    }
    this.metrics.reconciled(to, memory.phase === 'refused');
    this.events.flush();
    this.status.publish();
  }

  /**
   * Whether the candidates are read (and watched) in this phase: while a handover is wanted and
   * not fenced (after a fail-safe again once the API answers), and not while given up with the pod
   * staying (not retried until the drain ends).
   */
  private wantsCandidates(phase: L2Memory['phase']): boolean {
    const drain = this.ctx.drain.current;
    if (!drain.draining && !drain.terminating) return false;
    if (phase === 'given-up' && !drain.terminating) return false;
    return !FENCED.has(phase) || (phase === 'failsafe-fenced' && this.ctx.api.up);
  }

  /** Published as idle: idle, refused or given up. */
  private atRestIdle(): boolean {
    return PUBLISHED_PHASE[this.memory.phase] === 'idle';
  }
}

export const createFeature: FeatureFactory = (ctx) => new L2Handover(ctx);
