import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_DRAIN_TAINTS, parseSidecarEnv } from '../../../shared/contract.ts';
import { matchesDrainTaint, nodeDrainReason, podTerminating } from '../../../sidecar/drain/state.ts';

test('cordon, drain taints (with their effects) and nothing else count as draining', () => {
  const T = DEFAULT_DRAIN_TAINTS;
  const taint = (key: string, effect: string) => ({ spec: { taints: [{ key, effect }] } });
  assert.equal(nodeDrainReason(undefined, T), undefined);
  assert.equal(nodeDrainReason({ spec: {} }, T), undefined);
  assert.equal(nodeDrainReason({ spec: { unschedulable: true } }, T), 'cordoned');
  assert.equal(
    nodeDrainReason(taint('karpenter.sh/disrupted', 'NoSchedule'), T),
    'taint karpenter.sh/disrupted:NoSchedule',
  );
  // Karpenter v0.32–0.37 (v1beta1): karpenter.sh/disruption=disrupting:NoSchedule.
  assert.equal(
    nodeDrainReason(taint('karpenter.sh/disruption', 'NoSchedule'), T),
    'taint karpenter.sh/disruption:NoSchedule',
  );
  assert.equal(
    nodeDrainReason(taint('node.kubernetes.io/out-of-service', 'NoExecute'), T),
    'taint node.kubernetes.io/out-of-service:NoExecute',
  );
  // Effects count: a soft taint with a drain key is not a drain.
  assert.equal(nodeDrainReason(taint('ToBeDeletedByClusterAutoscaler', 'PreferNoSchedule'), T), undefined);
  assert.equal(nodeDrainReason(taint('dedicated', 'NoSchedule'), T), undefined);
  // A bare key matches the hard effects only.
  assert.equal(
    nodeDrainReason(taint('custom/drain', 'NoExecute'), ['custom/drain']),
    'taint custom/drain:NoExecute',
  );
  assert.equal(nodeDrainReason(taint('custom/drain', 'PreferNoSchedule'), ['custom/drain']), undefined);
  assert.ok(matchesDrainTaint({ key: 'x', effect: 'PreferNoSchedule' }, 'x:PreferNoSchedule'));
});

test('drain signal: taint ignores a bare cordon, eviction ignores the Node', () => {
  const T = DEFAULT_DRAIN_TAINTS;
  const cordoned = {
    spec: {
      unschedulable: true,
      taints: [{ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }],
    },
  };
  assert.equal(nodeDrainReason(cordoned, T, 'cordon'), 'cordoned');
  assert.equal(nodeDrainReason(cordoned, T, 'taint'), undefined);
  const autoscaled = {
    spec: { unschedulable: true, taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }] },
  };
  assert.equal(nodeDrainReason(autoscaled, T, 'taint'), 'taint ToBeDeletedByClusterAutoscaler:NoSchedule');
  assert.equal(nodeDrainReason(autoscaled, T, 'eviction'), undefined);
});

test('DRAINGUARD_DRAIN_TAINTS and DRAINGUARD_DRAIN_SIGNAL are validated, naming what is accepted', () => {
  const base = {
    DRAINGUARD_PROFILE: 'lease',
    DRAINGUARD_FEATURES: 'lease-handover',
    DRAINGUARD_LEASES: 'x',
    DRAINGUARD_POD_NAME: 'p',
    DRAINGUARD_POD_NAMESPACE: 'n',
    DRAINGUARD_NODE_NAME: 'n1',
  };
  assert.equal(parseSidecarEnv(base).drainSignal, 'cordon');
  assert.throws(
    () => parseSidecarEnv({ ...base, DRAINGUARD_DRAIN_TAINTS: 'a:NoSchedul' }),
    /DRAINGUARD_DRAIN_TAINTS: "a:NoSchedul" is not a taint; accepted are key or key:Effect with Effect one of NoSchedule, NoExecute, PreferNoSchedule/,
  );
  assert.throws(
    () => parseSidecarEnv({ ...base, DRAINGUARD_DRAIN_SIGNAL: 'drain' }),
    /DRAINGUARD_DRAIN_SIGNAL="drain": accepted values are cordon, taint, eviction/,
  );
});

test('a pod is terminating once it has a deletionTimestamp', () => {
  assert.equal(podTerminating({ metadata: {} }), false);
  assert.equal(podTerminating({ metadata: { deletionTimestamp: '2026-01-01T00:00:00Z' } }), true);
});
