// The seed sequence (issue 23) with drainguard, end to end on the HA lab: the control-plane node
// that owns the API VIP (MetalLB L2, the speaker simulator with drainguard injected) is drained
// through the VIP, its etcd member removed at once (its API server goes stale), and the node goes
// away 20 s later. The drained node must stop answering for the VIP within the fail-safe's grace
// of the removal and another control-plane node own it (figures in docs/l2-handover.md, make
// bench-seed).
import t from 'tap';
import { runSeed } from '../../bench/seed/sequence.ts';

// As make bench-seed: when the member goes while the handover runs, the VIP left ~15 s after the
// cordon (docs/l2-handover.md); 20 s keeps that case apart from "stayed until the node went".
const GONE_AFTER_S = 20;

t.test(
  'seed sequence with drainguard: the VIP leaves the drained control-plane node',
  { timeout: 600_000 },
  async (t) => {
    const p = await runSeed({
      inject: true,
      goneAfterS: GONE_AFTER_S,
      watchS: 5,
      note: (l) => t.comment(l),
    });
    t.comment(`seed: ${JSON.stringify(p)}`);
    t.ok(
      p.new_owner !== null && p.new_owner !== p.drained && p.new_owner.startsWith('cp-'),
      'one other control-plane node owns the VIP',
      { owners: p.owners },
    );
    // The test's point: the VIP does not stay on the drained node until it goes away (the
    // report's failure; without drainguard it does: silenced_s ≈ gone_at_s). The owner at the
    // end alone would not show it: after the node is gone its peers take over in any case.
    t.ok(
      p.silenced_s !== null && p.silenced_s < p.gone_at_s - 5,
      `the drained node stopped answering for the VIP at ${p.silenced_s} s, well before it went away (${p.gone_at_s} s)`,
      { owners: p.owners },
    );
    // The target: silenced before its member went, or within the fail-safe's grace (5 s)
    // after (+1 s: a handover write timed out on the stale server first, docs/l2-handover.md).
    t.ok(
      p.silenced_s !== null && p.silenced_s <= p.removed_at_s + 6,
      `silenced ${p.silenced_s} s, member removed at ${p.removed_at_s} s`,
      { owners: p.owners },
    );
    t.comment(
      `targets: silenced ${p.silenced_s} s (member removed at ${p.removed_at_s} s, node gone at ${p.gone_at_s} s), dark ${p.dark_s} s (≤ 1), dual ${p.dual_s} s (≤ 0.1), API unavailable ${p.api_unavailable_s} s (≤ 2)`,
    );
  },
);
