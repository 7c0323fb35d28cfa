// Sidecar feature "netfilter-cleanup": passes on start, on pod events for this node, on a
// periodic resync, and when a pending stale item becomes confirmable.
import { isApiError } from '../../shared/kube/api-error.ts';
import { Informer } from '../../shared/kube/informer.ts';
import type { KubeList, Pod } from '../../shared/kube/types.ts';
import { Coalescer } from '../coalesce.ts';
import { ownNode } from '../events.ts';
import type { Feature, FeatureContext, FeatureFactory } from '../feature.ts';
import { type MetricSpec, type Metrics, registerMetrics } from '../metrics.ts';
import { Cleaner, type PassResult } from './cleaner.ts';
import { formatMac } from './ebtables.ts';
import { nodeAddresses, podInfos, podsAwaitingIp } from './pods.ts';

/**
 * How long before our informer saw an IP-less pod its CNI ADD may have run (the kubelet's
 * watch can be ahead of ours); rules first seen stale after that are kept until the IP shows.
 */
const AWAITING_IP_SLACK_MS = 5_000;

/** Event text: counts plus the first few items, within the API's message limit. */
export function summarize(r: PassResult): string {
  const verb = r.dryRun ? 'would remove' : 'removed';
  const items = [
    ...r.removedRules.map((x) => {
      const p = x.rule.perPod!;
      return `${p.kind} ${p.ip}→${formatMac(p.mac)}`;
    }),
    ...r.removedNeighbours.map((n) => `neighbour ${n.neighbour.ip} dev ${n.neighbour.dev}`),
  ];
  const shown = items.slice(0, 10).join(', ');
  const more = items.length > 10 ? ` and ${items.length - 10} more` : '';
  return `netfilter cleanup ${verb} ${r.removedRules.length} stale ebtables rule(s) and ${r.removedNeighbours.length} neighbour(s): ${shown}${more}`;
}

const NETFILTER_METRICS = {
  removed: {
    kind: 'counter',
    name: 'drainguard_netfilter_removed_total',
    help: 'Stale ebtables rules / neighbours removed (dry_run="true": reported only).',
  },
  passes: { kind: 'counter', name: 'drainguard_netfilter_passes_total', help: 'Cleanup passes by result.' },
  stale: {
    kind: 'gauge',
    name: 'drainguard_netfilter_stale',
    help: 'Stale items seen by the last pass (before confirmation).',
  },
  held: {
    kind: 'gauge',
    name: 'drainguard_netfilter_held',
    help: 'Confirmed stale items not deleted by the last pass, by why (pod_awaiting_ip: a pod of this node has no IP in the API yet).',
  },
  usable: {
    kind: 'gauge',
    name: 'drainguard_netfilter_ebtables_usable',
    help: '1 if ebtables rules can be listed here.',
  },
} as const satisfies Record<string, MetricSpec>;

class NetfilterCleanup implements Feature {
  readonly name = 'netfilter-cleanup';
  private readonly ctx: FeatureContext;
  private readonly cleaner: Cleaner;
  private readonly informer: Informer;
  private readonly abort = new AbortController();
  private readonly coalescer: Coalescer;
  private timer: NodeJS.Timeout | undefined;
  private followUp: NodeJS.Timeout | undefined;
  private readonly metrics: Metrics<typeof NETFILTER_METRICS>;
  private readonly reportedDry = new Set<string>();
  /** Local time each IP-less pod was first seen (uid → ms). */
  private readonly awaitingSince = new Map<string, number>();
  /** Why passes are held right now (logged and raised once per episode). */
  private heldWhy: string | undefined;
  private degradedRaised = false;
  passes = 0;
  lastResult: PassResult | undefined;

  constructor(ctx: FeatureContext) {
    this.ctx = ctx;
    const { config } = ctx;
    this.coalescer = new Coalescer(
      (reason) => this.onePass(reason),
      () => this.abort.signal.aborted,
    );
    this.cleaner = new Cleaner({
      runner: ctx.runner,
      log: ctx.log,
      clock: ctx.clock,
      confirmMs: config.cleanupConfirmSeconds * 1000,
      dryRun: config.cleanupDryRun,
    });
    this.informer = new Informer(ctx.client, {
      path: '/api/v1/pods',
      fieldSelector: `spec.nodeName=${config.nodeName}`,
      log: ctx.log,
      clock: ctx.clock,
      onChange: (_objects, ev) => this.trigger(`pods ${ev.type}`),
      onError: (err) => {
        if (err.code === 403) void this.raiseDegraded(err.message);
      },
    });
    this.metrics = registerMetrics(ctx.metrics, NETFILTER_METRICS);
  }

  async start(): Promise<void> {
    const ebtables = await this.cleaner.detectEbtables();
    // Stopped while ebtables was probed (SIGTERM during start-up): start nothing more.
    if (this.abort.signal.aborted) return;
    this.metrics.usable.set({ flavour: ebtables.flavour ?? 'unknown' }, ebtables.usable ? 1 : 0);
    // Not awaited: start-up must not wait for the Event's retries (the API may not answer yet).
    if (!ebtables.usable)
      void this.ctx.events.record(
        ownNode(this.ctx.config),
        'Warning',
        'NetfilterCleanupDegraded',
        `${ebtables.error}; only neighbour entries are cleaned`,
      );
    this.informer.start();
    this.timer = setInterval(() => this.trigger('resync'), this.ctx.config.cleanupResyncSeconds * 1000);
    this.timer.unref();
    this.trigger('start');
  }

  /** Asks for a pass (one at a time, one more if asked meanwhile). */
  trigger(reason: string): void {
    if (this.abort.signal.aborted) return;
    this.coalescer.request(reason);
  }

  /** Resolves when no pass is running (tests and stop()). */
  idle(): Promise<void> {
    return this.coalescer.idle();
  }

  /**
   * A rule is judged stale when no pod of this node owns its IP, so a missing or stale pod
   * view makes every live pod's rules look stale (in azure-vnet's tunnel mode all of them point
   * at one gateway MAC). A 403 is a missing RBAC binding: say so once, on the Node.
   */
  private async raiseDegraded(message: string): Promise<void> {
    if (this.degradedRaised) return;
    this.degradedRaised = true;
    await this.ctx.events.record(
      { kind: 'Node', name: this.ctx.config.nodeName },
      'Warning',
      'NetfilterCleanupDegraded',
      `cannot read this node's pods (${message}); nothing is deleted until they can be read (needs RBAC: pods list/watch)`,
    );
  }

  /** Why no deleting pass may run now, or undefined. */
  private holdReason(): string | undefined {
    if (!this.informer.hasSynced) return 'the pod list has not been read yet';
    if (!this.informer.current)
      return `the pod view is not current (${this.informer.lastError?.message ?? 'relisting'})`;
    return undefined;
  }

  /** Records when each IP-less pod was first seen; a complete list also forgets the others. */
  private noteAwaiting(pods: Iterable<Pod>, complete: boolean): void {
    const now = this.ctx.clock.now();
    const awaiting = new Set(podsAwaitingIp(pods, this.ctx.config.nodeName));
    if (complete)
      for (const k of this.awaitingSince.keys()) if (!awaiting.has(k)) this.awaitingSince.delete(k);
    for (const k of awaiting) if (!this.awaitingSince.has(k)) this.awaitingSince.set(k, now);
  }

  /** A fresh read of this node's pods, right before a deletion; IP-less pods hold new items. */
  private async recheck(): Promise<{ pods: ReturnType<typeof podInfos>; holdFrom?: number }> {
    const { config, client } = this.ctx;
    let list: KubeList<Pod>;
    try {
      list = await client.get<KubeList<Pod>>('/api/v1/pods', {
        query: { fieldSelector: `spec.nodeName=${config.nodeName}` },
        timeoutMs: 10_000,
        signal: this.abort.signal,
      });
    } catch (e) {
      if (isApiError(e, 403)) void this.raiseDegraded((e as Error).message);
      throw e;
    }
    const items = list.items ?? [];
    this.noteAwaiting(items, true);
    const oldest = Math.min(...this.awaitingSince.values());
    return {
      pods: podInfos(items, config.nodeName),
      ...(Number.isFinite(oldest) ? { holdFrom: oldest - AWAITING_IP_SLACK_MS } : {}),
    };
  }

  private async onePass(reason: string): Promise<void> {
    const { log, config } = this.ctx;
    const hold = this.holdReason();
    if (hold) {
      this.metrics.passes.inc({ result: 'held' });
      // Waiting for the first list at start is routine; anything else is worth a warning.
      if (hold !== this.heldWhy)
        log[this.informer.restarts ? 'warn' : 'info'](
          { reason, why: hold },
          'netfilter cleanup held: nothing is deleted',
        );
      this.heldWhy = hold;
      return;
    }
    if (this.heldWhy) log.info({ was: this.heldWhy }, 'netfilter cleanup resumed: the pod view is current');
    this.heldWhy = undefined;
    // Track IP-less pods from the informer too, so their first sighting is as early as ours.
    this.noteAwaiting(this.informer.objects.values() as Iterable<Pod>, false);
    let result: PassResult;
    try {
      result = await this.cleaner.pass({
        pods: podInfos(this.informer.objects.values() as Iterable<Pod>, config.nodeName),
        // The drain watcher's view of the own Node, not a read of its own (one per node, every
        // resync). Until that view arrives the local interface addresses still protect the node's
        // own rules; a deletion needs a second sighting, by when it has arrived.
        nodeAddresses: nodeAddresses(this.ctx.drain.node),
        recheck: () => this.recheck(),
      });
    } catch (e) {
      this.metrics.passes.inc({ result: 'error' });
      log.error({ err: (e as Error).message, reason }, 'netfilter cleanup pass failed');
      return;
    }
    this.passes++;
    this.lastResult = result;
    this.metrics.passes.inc({ result: result.held ? 'held' : result.errors.length ? 'partial' : 'ok' });
    if (result.held) log.warn({ reason, why: result.held }, 'netfilter cleanup held: nothing is deleted');
    if (result.heldForNewPods)
      log.info(
        { kept: result.heldForNewPods, pods: this.awaitingSince.size },
        'stale-looking items kept: a pod of this node has no IP in the API yet and may own them',
      );
    this.metrics.stale.set({ kind: 'rule' }, result.staleRules.length);
    this.metrics.stale.set({ kind: 'neighbour' }, result.staleNeighbours.length);
    this.metrics.held.set({ why: 'pod_awaiting_ip' }, result.heldForNewPods);
    if (result.dryRun) {
      // Dry-run deletes nothing, so the same items come back every pass: report each once.
      const isNew = (k: string) => !this.reportedDry.has(k);
      result.removedRules = result.removedRules.filter((r) => isNew(r.key));
      result.removedNeighbours = result.removedNeighbours.filter((n) => isNew(n.key));
      for (const k of [...result.removedRules, ...result.removedNeighbours]) this.reportedDry.add(k.key);
    }
    const dry = String(result.dryRun);
    if (result.removedRules.length)
      this.metrics.removed.inc({ kind: 'rule', dry_run: dry }, result.removedRules.length);
    if (result.removedNeighbours.length)
      this.metrics.removed.inc({ kind: 'neighbour', dry_run: dry }, result.removedNeighbours.length);
    log.debug(
      {
        reason,
        stale: result.staleRules.length + result.staleNeighbours.length,
        pendingUntil: result.pendingUntil,
      },
      'netfilter cleanup pass',
    );
    for (const err of result.errors) log.error({ err }, 'netfilter cleanup: deletion failed');
    if (result.removedRules.length || result.removedNeighbours.length)
      await this.ctx.events.record(
        ownNode(config),
        result.errors.length ? 'Warning' : 'Normal',
        result.dryRun ? 'NetfilterCleanupDryRun' : 'NetfilterCleanup',
        summarize(result),
      );
    // Something is waiting for its second sighting: come back when it can be confirmed.
    if (result.pendingUntil !== undefined && !this.abort.signal.aborted) {
      clearTimeout(this.followUp);
      const wait = Math.max(0, result.pendingUntil - this.ctx.clock.now()) + 50;
      this.followUp = setTimeout(() => this.trigger('confirmation due'), wait);
      this.followUp.unref();
    }
  }

  async prestop(): Promise<Record<string, unknown>> {
    return {
      passes: this.passes,
      lastStaleRules: this.lastResult?.staleRules.length ?? 0,
      lastStaleNeighbours: this.lastResult?.staleNeighbours.length ?? 0,
    };
  }

  async stop(): Promise<void> {
    this.abort.abort();
    clearInterval(this.timer);
    clearTimeout(this.followUp);
    await this.informer.stop();
    await this.idle();
  }
}

export const createFeature: FeatureFactory = (ctx) => new NetfilterCleanup(ctx);
