// The robustness suite's planner (test/robustness/plan.ts): a plan is a function of seed and trial.
import t from 'tap';
import { IMPLEMENTED } from '../../robustness/nemesis.ts';
import {
  ACTIONS,
  describePlan,
  FAULT_KINDS,
  FAULTS,
  type FaultKind,
  faultSpec,
  KUBELET_RECOVERY_MS,
  planTrial,
} from '../../robustness/plan.ts';
import { trialRng } from '../../robustness/prng.ts';

const ALL = { kinds: FAULT_KINDS, ha: true };

t.test('the same seed and trial give the same plan; another trial or seed another one', async (t) => {
  t.same(planTrial(42, 7, ALL), planTrial(42, 7, ALL));
  const plans = [...Array(20).keys()].map((i) => JSON.stringify(planTrial(42, i, ALL)));
  t.ok(new Set(plans).size > 15, 'trials differ');
  t.not(JSON.stringify(planTrial(43, 7, ALL)), JSON.stringify(planTrial(42, 7, ALL)));
});

t.test('the PRNG is deterministic, in range, and takes large seeds apart', async (t) => {
  const a = trialRng(1, 2);
  const b = trialRng(1, 2);
  const xs = [...Array(100)].map(() => a.next());
  t.same(
    xs,
    [...Array(100)].map(() => b.next()),
  );
  t.ok(xs.every((x) => x >= 0 && x < 1));
  t.not(trialRng(2 ** 40, 0).next(), trialRng(2 ** 40 + 2 ** 32, 0).next(), 'high bits count');
  t.throws(() => trialRng(1.5, 0), /integers/);
});

t.test('only the kinds the runner implements are picked, within their ranges', async (t) => {
  const kinds: FaultKind[] = ['etcd-pause', 'api-path-drop', 'second-cordon'];
  const seen = new Set<string>();
  const bad: string[] = [];
  for (let i = 0; i < 300; i++) {
    const p = planTrial(9, i, { kinds, windowMs: 5_000 });
    if (p.faults.length < 1 || p.faults.length > 2) bad.push(`${i}: ${p.faults.length} faults`);
    if (new Set(p.faults.map((f) => f.kind)).size !== p.faults.length) bad.push(`${i}: a kind twice`);
    const at = p.faults.map((f) => f.atMs);
    if (at.some((a, j) => j > 0 && a < (at[j - 1] as number))) bad.push(`${i}: not in time order`);
    for (const f of p.faults) {
      seen.add(f.kind);
      const [lo, hi] = FAULTS[f.kind].durationMs;
      if (!kinds.includes(f.kind)) bad.push(`${i}: ${f.kind} not implemented`);
      // Past the window only when moved after an API outage (second-cordon after an etcd pause).
      const moved = f.kind === 'second-cordon' && p.faults.some((o) => o.kind === 'etcd-pause');
      if (f.durationMs < lo || f.durationMs > hi || f.atMs < 0 || (f.atMs > 5_000 && !moved))
        bad.push(`${i}: ${f.kind} out of range`);
      if ((f.direction !== undefined) !== (f.kind === 'api-path-drop'))
        bad.push(`${i}: direction on ${f.kind}`);
    }
  }
  t.same(bad, []);
  t.same([...seen].sort(), [...kinds].sort(), 'every implemented kind comes up');
});

t.test('faults tied to an action or to the HA control plane are picked only there', async (t) => {
  const bad: string[] = [];
  const actions = new Set<string>();
  for (let i = 0; i < 300; i++) {
    const p = planTrial(3, i, { kinds: FAULT_KINDS, ha: false, maxFaults: 3 });
    actions.add(p.action);
    if (p.faults.some((f) => f.kind === 'stale-api-server')) bad.push(`${i}: stale API server without HA`);
    if (p.faults.some((f) => f.kind === 'uncordon-recordon') && p.action !== 'drain')
      bad.push(`${i}: uncordon-recordon with ${p.action}`);
    if ((p.uncordonAtMs !== undefined) !== (p.action === 'uncordon-mid-handover'))
      bad.push(`${i}: uncordon moment with ${p.action}`);
    if (p.action === 'delete-leader-pod' && p.subject !== 'lease-holder')
      bad.push(`${i}: leader pod of ${p.subject}`);
    if (p.action === 'delete-speaker-pod' && p.subject !== 'vip-owner')
      bad.push(`${i}: speaker pod of ${p.subject}`);
  }
  t.same(bad, []);
  t.same([...actions].sort(), [...ACTIONS].sort(), 'every action comes up');
  t.ok(
    [...Array(300).keys()].some((i) =>
      planTrial(3, i, { kinds: FAULT_KINDS, ha: true }).faults.some((f) => f.kind === 'stale-api-server'),
    ),
    'the stale API server with HA',
  );
  // An action with no fault to pick is never chosen.
  t.equal(planTrial(1, 1, { kinds: ['uncordon-recordon'] }).action, 'drain');
  t.throws(() => planTrial(1, 1, { kinds: [] }), /no fault kinds/);
});

t.test('a fault struck through the API is planned after the API outages of its trial', async (t) => {
  // SEED=13 TRIAL=43 found it: a liveness failure's `kubectl exec` inside an API server restart.
  const kinds = FAULT_KINDS.filter((k) => k !== 'api-429' && k !== 'stale-api-server');
  const p = planTrial(13, 43, { kinds });
  const outage = p.faults.find((f) => f.kind === 'api-server-restart');
  const liveness = p.faults.find((f) => f.kind === 'liveness-failure');
  t.ok(outage && liveness, 'the trial that found it still plans both');
  t.ok(
    liveness!.atMs >= outage!.atMs + outage!.durationMs,
    `liveness failure at ${liveness!.atMs} ms, after the restart's ${outage!.atMs}+${outage!.durationMs} ms`,
  );
  const bad: string[] = [];
  for (let i = 0; i < 500; i++) {
    const q = planTrial(21, i, { kinds, maxFaults: 3 });
    const downs = q.faults.filter((f) => faultSpec(f.kind).apiOutage === true);
    // Two seconds before: a strike (kubectl exec) still running when the outage starts.
    for (const f of q.faults.filter((f) => faultSpec(f.kind).needsApi === true))
      for (const o of downs)
        if (f.atMs >= o.atMs - 2_000 && f.atMs < o.atMs + o.durationMs) bad.push(`${i}: ${describePlan(q)}`);
    const at = q.faults.map((f) => f.atMs);
    if (at.some((a, j) => j > 0 && a < (at[j - 1] as number))) bad.push(`${i}: not in time order`);
  }
  t.same(bad, []);
});

t.test('a fault struck through the kubelet is never planned inside a kubelet restart', async (t) => {
  // SEED=77 TRIAL=77 found it: the liveness failure's `kubectl exec` at 3.3 s, the kubelet down
  // 2.0–6.3 s ("dial tcp …:10250: connection refused").
  const p = planTrial(77, 77, { kinds: IMPLEMENTED });
  const restart = p.faults.find((f) => f.kind === 'kubelet-restart');
  const liveness = p.faults.find((f) => f.kind === 'liveness-failure');
  t.ok(restart && liveness, 'the trial that found it still plans both');
  t.ok(
    liveness!.atMs >= restart!.atMs + restart!.durationMs + KUBELET_RECOVERY_MS,
    `liveness failure at ${liveness!.atMs} ms, after the restart's ${restart!.atMs}+${restart!.durationMs} ms and its recovery`,
  );
  const bad: string[] = [];
  for (let i = 0; i < 500; i++) {
    const q = planTrial(21, i, { kinds: IMPLEMENTED, maxFaults: 3 });
    const downs = q.faults.filter((f) => faultSpec(f.kind).kubeletOutage === true);
    for (const f of q.faults.filter((f) => faultSpec(f.kind).needsKubelet === true))
      for (const o of downs)
        if (f.atMs >= o.atMs - 2_000 && f.atMs < o.atMs + o.durationMs) bad.push(`${i}: ${describePlan(q)}`);
  }
  t.same(bad, []);
});
