// The seed sequence (issue 23) with drainguard, end to end on the HA lab: the control-plane node
// that owns the API VIP (MetalLB L2, the speaker simulator with drainguard injected) is drained
// through the VIP, its etcd member removed at once (its API server goes stale), and the node goes
// away 20 s later. Another control-plane node must own the VIP afterwards; the targets
// are printed, not yet held (figures in docs/l2-handover.md, make bench-seed).
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
    // Not asserted yet (no todos in CI): the targets — silenced ≥ 2 s before the node goes,
    // dark ≤ 1 s, dual ≤ 0.1 s, the API through the VIP back within 2 s. In 1 run of 2 the label
    // was written but no peer took the VIP (their watches, by every sign, on the drained node's
    // stale server), no confirmation came, and cached reads cleared "API down" before the 5 s
    // fail-safe grace, so the VIP stayed until the node went (issue 23 item 4, docs/l2-handover.md).
    // With that fix these become assertions and the test fails if the VIP stays on the drained node.
    t.comment(
      `targets (not yet held): silenced ${p.silenced_s} s (node gone at ${p.gone_at_s} s), dark ${p.dark_s} s, dual ${p.dual_s} s, API unavailable ${p.api_unavailable_s} s`,
    );
  },
);
