// What the L2 handover reports besides its Node annotation: Events on the Node and on the speaker's
// Pod (held while the API is down: written then, they would be lost) and its metrics (names and
// help texts are read by dashboards and tests: unchanged).
import type { L2Phase } from '../../shared/l2-state.ts';
import { L2_PHASES } from '../../shared/l2-state.ts';
import { ownNode, ownPod } from '../events.ts';
import type { FeatureContext } from '../feature.ts';
import { type MetricSpec, type Metrics, registerMetrics } from '../metrics.ts';
import type { L2EventReason } from './handover/index.ts';

export class HeldEvents {
  private readonly ctx: FeatureContext;
  private readonly pending: { type: 'Normal' | 'Warning'; reason: L2EventReason; message: string }[] = [];

  constructor(ctx: FeatureContext) {
    this.ctx = ctx;
  }

  record(type: 'Normal' | 'Warning', reason: L2EventReason, message: string): void {
    this.pending.push({ type, reason, message });
    this.flush();
  }

  /** Writes what is held, unless the API is down. */
  flush(): void {
    const { config, events, api } = this.ctx;
    if (!api.up || this.pending.length === 0) return;
    // Best effort and not awaited: reporting must never hold up the handover itself.
    for (const { type, reason, message } of this.pending.splice(0))
      for (const target of [ownNode(config), ownPod(config)])
        void events.record(target, type, reason, message);
  }
}

const L2_METRICS = {
  phase: { kind: 'gauge', name: 'drainguard_l2_phase', help: 'L2 handover phase (1 = current).' },
  actions: {
    kind: 'counter',
    name: 'drainguard_l2_actions_total',
    help: 'L2 handover actions by kind and outcome (observe-only counts as skipped).',
  },
  impossible: {
    kind: 'gauge',
    name: 'drainguard_l2_handover_impossible',
    help: '1 while a drain is refused because no other node could announce the VIPs (never strand a VIP).',
  },
  handoverSeconds: {
    kind: 'gauge',
    name: 'drainguard_l2_handover_seconds',
    help: 'Duration of the last L2 handover from start to fence.',
  },
} as const satisfies Record<string, MetricSpec>;

export class L2Metrics {
  private readonly m: Metrics<typeof L2_METRICS>;

  constructor(ctx: FeatureContext) {
    this.m = registerMetrics(ctx.metrics, L2_METRICS);
  }

  /** After each reconcile: the published phase, and whether the handover is refused. */
  reconciled(phase: L2Phase, refused: boolean): void {
    for (const p of L2_PHASES) this.m.phase.set({ phase: p }, p === phase ? 1 : 0);
    this.m.impossible.set({}, refused ? 1 : 0);
  }

  fenced(handoverMs: number): void {
    this.m.handoverSeconds.set({}, handoverMs / 1000);
  }

  action(kind: string, outcome: 'ok' | 'error' | 'skipped'): void {
    this.m.actions.inc({ action: kind, outcome });
  }
}
