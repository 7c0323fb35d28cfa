// The L2 handover's actions carried out on the node and the API: the exclude label (own-node.ts),
// the fence (host.ts) and Events (reporting.ts), each counted in metrics, each kind backing off
// after a failure. Observe-only, the label is only pretended (what a reconcile then observes).
import { RetryGate } from '../../shared/backoff.ts';
import { isApiError } from '../../shared/kube/api-error.ts';
import { EXCLUDE_LABEL } from '../../shared/names.ts';
import type { FeatureContext } from '../feature.ts';
import type { FenceSpec } from './fence.ts';
import { L2_EVENT_REASONS, type L2Action } from './handover/index.ts';
import type { L2Host } from './host.ts';
import type { OwnNode } from './own-node.ts';
import type { HeldEvents, L2Metrics } from './reporting.ts';

export class L2Actions {
  private readonly ctx: FeatureContext;
  private readonly node: OwnNode;
  private readonly host: L2Host;
  private readonly events: HeldEvents;
  private readonly metrics: L2Metrics;
  private readonly fenced: (fence: FenceSpec | undefined) => void;
  /**
   * Per action kind, after a failure: not before a capped, jittered backoff. The core asks again
   * on every reconcile (it acts on what it observes), so a persistent nft error, a 403 or a 404
   * must not become a busy loop of execs or PATCHes.
   */
  private readonly retryGate: RetryGate;
  /** Observe-only: what the label would be. */
  simulatedLabel: boolean | undefined;

  /** `fenced`: the fence as nft shows it after a fence or unfence. */
  constructor(
    ctx: FeatureContext,
    parts: { node: OwnNode; host: L2Host; events: HeldEvents; metrics: L2Metrics },
    fenced: (fence: FenceSpec | undefined) => void,
  ) {
    this.ctx = ctx;
    this.node = parts.node;
    this.host = parts.host;
    this.events = parts.events;
    this.metrics = parts.metrics;
    this.fenced = fenced;
    this.retryGate = new RetryGate(() => ctx.clock.now(), { baseMs: 200, capMs: 10_000 });
  }

  /** Carries out one action; false where it was not (backing off, failed or abandoned). */
  async execute(a: L2Action, signal: AbortSignal): Promise<boolean> {
    const { ctx } = this;
    const observeOnly = ctx.config.observeOnly;
    if (!this.retryGate.open(a.kind)) return false;
    try {
      switch (a.kind) {
        case 'event': {
          const message = observeOnly ? `observe-only, would have: ${a.message}` : a.message;
          if (a.reason === L2_EVENT_REASONS.failsafeFence) ctx.log.error({ reason: a.reason }, message);
          this.events.record(a.type, a.reason, message);
          return true;
        }
        case 'label':
        case 'unlabel': {
          const add = a.kind === 'label';
          if (observeOnly) {
            this.simulatedLabel = add ? true : undefined;
            ctx.log.info({ label: EXCLUDE_LABEL }, `observe-only: would ${a.kind} the Node`);
            this.metrics.action(a.kind, 'skipped');
            return true;
          }
          await this.node.setExcludeLabel(add, signal);
          break;
        }
        case 'fence':
        case 'unfence': {
          const fence = await this.host.applyFence(a.kind === 'fence' ? a.spec : undefined);
          this.fenced(fence);
          if (a.kind === 'fence' && !fence)
            throw new Error('nft accepted the fence but the table cannot be read back');
          break;
        }
      }
      this.metrics.action(a.kind, observeOnly ? 'skipped' : 'ok');
      this.retryGate.succeeded(a.kind);
      return true;
    } catch (e) {
      // Abandoned for the fail-safe: not a failure to back off from (the next reconcile decides).
      if (signal.aborted) return false;
      this.metrics.action(a.kind, 'error');
      const { waitMs, attempt } = this.retryGate.failed(a.kind);
      ctx.log.error(
        {
          action: a.kind,
          err: (e as Error).message,
          retryInMs: waitMs,
          attempt,
          ...(isApiError(e, 404) ? { hint: 'own Node not found (deleted?)' } : {}),
        },
        'L2 action failed; will retry',
      );
      return false;
    }
  }
}
