import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_DRAIN_TAINTS } from '../../../shared/contract.ts';
import { nodeDrainReason, podTerminating } from '../../../sidecar/drain/state.ts';

test('cordon, drain taints and nothing else count as draining', () => {
  assert.equal(nodeDrainReason(undefined, DEFAULT_DRAIN_TAINTS), undefined);
  assert.equal(nodeDrainReason({ spec: {} }, DEFAULT_DRAIN_TAINTS), undefined);
  assert.equal(nodeDrainReason({ spec: { unschedulable: true } }, DEFAULT_DRAIN_TAINTS), 'cordoned');
  assert.equal(
    nodeDrainReason(
      { spec: { taints: [{ key: 'karpenter.sh/disrupted', effect: 'NoSchedule' }] } },
      DEFAULT_DRAIN_TAINTS,
    ),
    'taint karpenter.sh/disrupted',
  );
  assert.equal(
    nodeDrainReason(
      { spec: { taints: [{ key: 'dedicated', value: 'x', effect: 'NoSchedule' }] } },
      DEFAULT_DRAIN_TAINTS,
    ),
    undefined,
  );
  assert.equal(
    nodeDrainReason({ spec: { taints: [{ key: 'custom/drain', effect: 'NoSchedule' }] } }, ['custom/drain']),
    'taint custom/drain',
  );
});

test('a pod is terminating once it has a deletionTimestamp', () => {
  assert.equal(podTerminating({ metadata: {} }), false);
  assert.equal(podTerminating({ metadata: { deletionTimestamp: '2026-01-01T00:00:00Z' } }), true);
});
