import t from 'tap';
import { DEFAULT_DRAIN_TAINTS } from '../../../../shared/contract.ts';
import { parseSidecarEnv } from '../../../../shared/contract-env.ts';
import { matchesDrainTaint, nodeDrainReason, podTerminating } from '../../../../sidecar/drain/state.ts';

t.test('cordon, drain taints (with their effects) and nothing else count as draining', async (t) => {
  const T = DEFAULT_DRAIN_TAINTS;
  const taint = (key: string, effect: string) => ({ spec: { taints: [{ key, effect }] } });
  t.equal(nodeDrainReason(undefined, T), undefined);
  t.equal(nodeDrainReason({ spec: {} }, T), undefined);
  t.equal(nodeDrainReason({ spec: { unschedulable: true } }, T), 'cordoned');
  t.equal(
    nodeDrainReason(taint('karpenter.sh/disrupted', 'NoSchedule'), T),
    'taint karpenter.sh/disrupted:NoSchedule',
  );
  // Karpenter v0.32–0.37 (v1beta1): karpenter.sh/disruption=disrupting:NoSchedule.
  t.equal(
    nodeDrainReason(taint('karpenter.sh/disruption', 'NoSchedule'), T),
    'taint karpenter.sh/disruption:NoSchedule',
  );
  t.equal(
    nodeDrainReason(taint('node.kubernetes.io/out-of-service', 'NoExecute'), T),
    'taint node.kubernetes.io/out-of-service:NoExecute',
  );
  // Effects count: a soft taint with a drain key is not a drain.
  t.equal(nodeDrainReason(taint('ToBeDeletedByClusterAutoscaler', 'PreferNoSchedule'), T), undefined);
  t.equal(nodeDrainReason(taint('dedicated', 'NoSchedule'), T), undefined);
  // A bare key matches the hard effects only.
  t.equal(
    nodeDrainReason(taint('custom/drain', 'NoExecute'), ['custom/drain']),
    'taint custom/drain:NoExecute',
  );
  t.equal(nodeDrainReason(taint('custom/drain', 'PreferNoSchedule'), ['custom/drain']), undefined);
  t.ok(matchesDrainTaint({ key: 'x', effect: 'PreferNoSchedule' }, 'x:PreferNoSchedule'));
});

t.test('drain signal: taint ignores a bare cordon, eviction ignores the Node', async (t) => {
  const T = DEFAULT_DRAIN_TAINTS;
  const cordoned = {
    spec: {
      unschedulable: true,
      taints: [{ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }],
    },
  };
  t.equal(nodeDrainReason(cordoned, T, 'cordon'), 'cordoned');
  t.equal(nodeDrainReason(cordoned, T, 'taint'), undefined);
  const autoscaled = {
    spec: { unschedulable: true, taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }] },
  };
  t.equal(nodeDrainReason(autoscaled, T, 'taint'), 'taint ToBeDeletedByClusterAutoscaler:NoSchedule');
  t.equal(nodeDrainReason(autoscaled, T, 'eviction'), undefined);
});

t.test(
  'DRAINGUARD_DRAIN_TAINTS and DRAINGUARD_DRAIN_SIGNAL are validated, naming what is accepted',
  async (t) => {
    const base = {
      DRAINGUARD_PROFILE: 'lease',
      DRAINGUARD_FEATURES: 'lease-handover',
      DRAINGUARD_LEASES: 'x',
      DRAINGUARD_POD_NAME: 'p',
      DRAINGUARD_POD_NAMESPACE: 'n',
      DRAINGUARD_NODE_NAME: 'n1',
    };
    t.equal(parseSidecarEnv(base).drainSignal, 'cordon');
    t.throws(
      () => parseSidecarEnv({ ...base, DRAINGUARD_DRAIN_TAINTS: 'a:NoSchedul' }),
      /DRAINGUARD_DRAIN_TAINTS: "a:NoSchedul" is not a taint; accepted are key or key:Effect with Effect one of NoSchedule, NoExecute, PreferNoSchedule/,
    );
    t.throws(
      () => parseSidecarEnv({ ...base, DRAINGUARD_DRAIN_SIGNAL: 'drain' }),
      /DRAINGUARD_DRAIN_SIGNAL="drain": accepted values are cordon, taint, eviction/,
    );
  },
);

t.test('a pod is terminating once it has a deletionTimestamp', async (t) => {
  t.equal(podTerminating({ metadata: {} }), false);
  t.equal(podTerminating({ metadata: { deletionTimestamp: '2026-01-01T00:00:00Z' } }), true);
});
