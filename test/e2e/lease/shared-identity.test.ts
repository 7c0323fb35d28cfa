// Two pods on one node share the Lease identity under the `node-name` scheme (kube-vip's
// vip_nodename): a DaemonSet's surge rollout (maxSurge > 0) runs the new pod next to the old one.
// The old pod's sidecar must not replace or release a Lease its sibling renews under that same
// identity — the sibling goes on leading, and a successor named elsewhere would lead too until the
// sibling's RenewDeadline: two leaders. Real API server, client-go candidate simulators, sidecars
// as processes, the kubelet stand-in.
import t, { type Test } from 'tap';
import { type ControlPlane, sharedControlPlane } from '../../../lab/bed/control-plane.ts';
import { LeaseScene, type PodOptions } from '../../../lab/bed/lease-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import { handoverResult } from './routers.ts';

let cp: ControlPlane;
t.before(async () => {
  cp = await sharedControlPlane();
});
t.teardown(async () => {
  await cp?.stop();
});

// Shorter than skupper's 15 s / 10 s / 2 s so the dual-leader window the test looks for (up to
// RenewDeadline + RetryPeriod after the write) is seen within a few seconds.
const SIM = { leaseDurationMs: 6_000, renewDeadlineMs: 4_000, retryPeriodMs: 1_000 };
const NODE_NAME = {
  DRAINGUARD_PROFILE: 'lease',
  DRAINGUARD_LEASES: 'vip-leader',
  DRAINGUARD_GUARDED_CONTAINER: 'kube-vip',
  DRAINGUARD_IDENTITY_SCHEME: 'node-name',
  DRAINGUARD_SUCCESSOR_SELECTOR: 'app=kube-vip',
  DRAINGUARD_VERIFY_SECONDS: '3',
};

/** Nodes a and b; `pod(name, node)` describes a kube-vip-like pod whose identity is its node's name. */
async function kubeVipScene(t: Test) {
  const w = await LeaseScene.create(cp, { nodes: ['a', 'b'], lease: 'vip-leader', sim: SIM });
  t.teardown(() => w.cleanup());
  const pod = (name: string, node: string): PodOptions => ({
    name,
    node,
    identity: w.node(node),
    labels: { app: 'kube-vip' },
    leaderContainer: 'kube-vip',
    sidecar: NODE_NAME,
  });
  return { w, pod };
}

t.test(
  'surge rollout under node-name: the old pod leaves the Lease to the new pod on its node; never two leaders',
  async (t) => {
    const { w, pod } = await kubeVipScene(t);
    const old = await w.addPod(pod('vip-a-old', 'a'));
    await w.waitLeading('vip-a-old');
    await w.addPod(pod('vip-b', 'b'));
    // The surge: the new pod starts on node a while the old one still runs. Its candidate finds
    // the Lease held by its own identity and renews it (client-go: holder == own identity).
    const surge = await w.addPod(pod('vip-a-new', 'a'));
    await waitFor('the new pod on node a renews under the shared identity', () => surge.sim.leading, {
      timeoutMs: 15_000,
      intervalMs: 20,
    });
    await w.waitSidecarsReady();
    // The rollout deletes the old pod.
    await w.deletePod('vip-a-old');
    t.equal(await old.sidecar!.exited, 0, 'the old sidecar exits cleanly');
    const result = handoverResult(old.sidecar!);
    t.equal(result.outcome, 'identity-shared', 'left to the pod sharing the identity');
    if (result.outcome !== 'identity-shared') t.comment(old.sidecar!.dump());
    // Long enough for a displaced sibling to notice: RenewDeadline + RetryPeriod and a margin.
    const until = Date.now() + SIM.renewDeadlineMs + 2 * SIM.retryPeriodMs;
    await waitFor('a displaced leader to give up', () => Date.now() >= until, { timeoutMs: 15_000 });
    t.strictSame(
      w.splitBrain().map(([x, y]) => `${x.identity} and ${y.identity}`),
      [],
      'never two identities leading at once',
    );
    t.equal((await w.readLease()).spec?.holderIdentity, w.node('a'), 'still held under node a');
    t.ok(surge.sim.leading, 'the new pod on node a leads on');
    t.notOk(w.pod('vip-b').sim.leading, 'the pod on node b was never made leader');
    const ev = await w.events('LeaseIdentityShared');
    t.equal(ev.length, 1);
    t.match(ev[0]!.message, /vip-a-new/);
  },
);

t.test(
  'node-name with no other pod on the node: the Lease still goes to the pod on the other node',
  async (t) => {
    const { w, pod } = await kubeVipScene(t);
    const a = await w.addPod(pod('vip-a', 'a'));
    await w.waitLeading('vip-a');
    const b = await w.addPod(pod('vip-b', 'b'));
    await w.waitSidecarsReady();
    await w.deletePod('vip-a');
    await waitFor('vip-b leading', () => b.sim.leading, { timeoutMs: 15_000, intervalMs: 20 });
    t.equal(await a.sidecar!.exited, 0);
    const outcome = handoverResult(a.sidecar!).outcome;
    t.equal(outcome, 'handed-over');
    if (outcome !== 'handed-over') t.comment(a.sidecar!.dump());
    t.equal((await w.readLease()).spec?.holderIdentity, w.node('b'));
    t.strictSame(w.splitBrain(), []);
  },
);
