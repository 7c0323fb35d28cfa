// What every feature reports through: registerMetrics (a table of metrics becomes typed metrics,
// in the table's order) and the own Node and Pod as Event targets.
import t from 'tap';
import { fakeContext, ManualClock } from '../../../lab/fake/feature-context.ts';
import { Registry } from '../../../shared/metrics.ts';
import { ownNode, ownPod } from '../../../sidecar/events.ts';
import { registerMetrics } from '../../../sidecar/metrics.ts';

t.test('registers each metric of the table as its kind, in the order of the table', async (t) => {
  const registry = new Registry();
  const m = registerMetrics(registry, {
    passes: { kind: 'counter', name: 'drainguard_test_passes_total', help: 'Passes.' },
    phase: { kind: 'gauge', name: 'drainguard_test_phase', help: 'Phase.' },
    took: { kind: 'histogram', name: 'drainguard_test_seconds', help: 'Took.', buckets: [1, 0.5] },
  } as const);
  m.passes.inc({ result: 'ok' });
  m.phase.set({}, 2);
  m.took.observe({}, 0.7);
  t.equal(
    registry.render(),
    [
      '# HELP drainguard_test_passes_total Passes.',
      '# TYPE drainguard_test_passes_total counter',
      'drainguard_test_passes_total{result="ok"} 1',
      '# HELP drainguard_test_phase Phase.',
      '# TYPE drainguard_test_phase gauge',
      'drainguard_test_phase 2',
      '# HELP drainguard_test_seconds Took.',
      '# TYPE drainguard_test_seconds histogram',
      'drainguard_test_seconds_bucket{le="0.5"} 0',
      'drainguard_test_seconds_bucket{le="1"} 1',
      'drainguard_test_seconds_bucket{le="+Inf"} 1',
      'drainguard_test_seconds_sum 0.7',
      'drainguard_test_seconds_count 1',
      '',
    ].join('\n'),
  );
});

t.test(
  'Events name the own Node and the own Pod (with its UID when the downward API gives it)',
  async (t) => {
    const env = {
      DRAINGUARD_PROFILE: 'metallb-speaker',
      DRAINGUARD_FEATURES: 'l2-handover',
      DRAINGUARD_POD_NAME: 'speaker-a',
      DRAINGUARD_POD_NAMESPACE: 'metallb-system',
      DRAINGUARD_NODE_NAME: 'node-a',
    };
    const clock = new ManualClock(0);
    const { ctx } = fakeContext({ env, client: {} as never, clock });
    t.strictSame(ownNode(ctx.config), { kind: 'Node', name: 'node-a' });
    t.strictSame(ownPod(ctx.config), { kind: 'Pod', name: 'speaker-a', namespace: 'metallb-system' });
    const withUid = fakeContext({ env: { ...env, DRAINGUARD_POD_UID: 'uid-1' }, client: {} as never, clock });
    t.strictSame(ownPod(withUid.ctx.config), {
      kind: 'Pod',
      name: 'speaker-a',
      namespace: 'metallb-system',
      uid: 'uid-1',
    });
  },
);
