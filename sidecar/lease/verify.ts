// After a Lease write: waits (on the informer's view, woken at every change) until the successor
// renews it or somebody acquires it, within verifySeconds, then reports the outcome in an Event,
// the result and the handover-time metric.
import type { Lease } from '../../shared/kube/types.ts';
import { ownPod } from '../events.ts';
import type { FeatureContext } from '../feature.ts';
import type { Metrics } from '../metrics.ts';
import { LEASE_EVENT_REASONS, type LeaseRef, verifyProgress } from './core.ts';
import { type LEASE_METRICS, type LeaseResult, type Outcome, refName } from './results.ts';
import type { LeaseViews } from './views.ts';

export class LeaseVerifier {
  private readonly ctx: FeatureContext;
  private readonly views: LeaseViews;
  private readonly metrics: Metrics<typeof LEASE_METRICS>;
  /** Aborted when the feature stops. */
  private readonly signal: AbortSignal;

  constructor(
    ctx: FeatureContext,
    views: LeaseViews,
    metrics: Metrics<typeof LEASE_METRICS>,
    signal: AbortSignal,
  ) {
    this.ctx = ctx;
    this.views = views;
    this.metrics = metrics;
    this.signal = signal;
  }

  async verify(
    ref: LeaseRef,
    action: 'replace' | 'release',
    written: Lease,
    writeMs: number,
    deadline: number,
    decision: { why: string; successor?: string },
  ): Promise<LeaseResult> {
    const config = this.ctx.config;
    const clock = this.ctx.clock;
    const key = refName(ref);
    const started = clock.now();
    const until = Math.min(deadline, started + config.verifySeconds * 1000);
    const writtenVersion = written.metadata?.resourceVersion ?? '';
    let state: ReturnType<typeof verifyProgress> = { state: 'pending', holder: '' };
    // The informer already watches the Lease: its view, woken at every change, instead of GETs
    // every 100 ms. Only a view that has shown the write tells what followed it (an older one
    // still shows the holder before it).
    while (clock.now() < until && !this.signal.aborted) {
      const changed = this.views.nextChange(key);
      if (this.views.hasShown(key, writtenVersion)) {
        state = verifyProgress(written, this.views.get(key), action);
        if (state.state !== 'pending') break;
      }
      await clock.sleep(until - clock.now(), AbortSignal.any([changed, this.signal]));
    }
    const verifyMs = clock.now() - started;
    const successor = decision.successor;
    const secs = (ms: number) => (ms / 1000).toFixed(1);
    let outcome: Outcome;
    let msg: string;
    if (action === 'replace') {
      if (state.state === 'renewed') {
        outcome = 'handed-over';
        msg = `Lease ${key} handed to ${successor} ${secs(writeMs)} s after the leader stopped; successor renewed after ${secs(verifyMs)} s`;
        this.metrics.durations.observe({ action }, (writeMs + verifyMs) / 1000);
      } else {
        outcome = 'handed-over-unverified';
        msg =
          state.state === 'taken-by-other'
            ? `Lease ${key} handed to ${successor}, then taken by ${state.holder}`
            : `Lease ${key} handed to ${successor}; no renew seen within ${config.verifySeconds} s`;
      }
    } else {
      outcome = 'released';
      msg = `Lease ${key} released (${decision.why})${state.state === 'acquired' ? `; acquired by ${state.holder} after ${secs(verifyMs)} s` : ''}`;
      if (state.state === 'acquired') this.metrics.durations.observe({ action }, (writeMs + verifyMs) / 1000);
    }
    const warn = outcome === 'handed-over-unverified';
    await this.ctx.events.record(
      ownPod(config),
      warn ? 'Warning' : 'Normal',
      warn ? LEASE_EVENT_REASONS.unverified : LEASE_EVENT_REASONS.handedOver,
      msg,
    );
    return { lease: key, outcome, detail: msg, writeMs, verifyMs, ...(successor ? { successor } : {}) };
  }
}
