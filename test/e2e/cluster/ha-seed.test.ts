// The seed sequence (issue 23) with drainguard, end to end on the HA lab: the control-plane node
// that owns the API VIP (MetalLB L2, the speaker simulator with drainguard injected) is drained
// through the VIP, its etcd member removed at once (its API server goes stale), and the node goes
// away 20 s later. The drain has nothing to evict here (the webhook runs on the worker), so the
// member goes ~0.2 s after the cordon, while the handover runs: the hard order. The drained node
// must stop answering for the VIP within the fail-safe's grace of the removal, another
// control-plane node own it, nobody answer twice, the VIP never be dark longer than the issue's
// 1 s, and the drained node's sidecar fence its stale API server (figures in
// docs/l2-handover.md, make bench-seed).
import t from 'tap';
import { runSeed } from '../../bench/seed/sequence.ts';

// As make bench-seed: 20 s keeps "silenced by drainguard" apart from "stayed until the node went".
const GONE_AFTER_S = 20;
/** DRAINGUARD_FAILSAFE_GRACE_SECONDS' default. */
const FAILSAFE_GRACE_S = 5;

t.test(
  'seed sequence with drainguard: the VIP leaves the drained control-plane node',
  { timeout: 600_000 },
  async (t) => {
    const lines: string[] = [];
    const p = await runSeed({
      inject: true,
      goneAfterS: GONE_AFTER_S,
      watchS: 5,
      note: (l) => {
        lines.push(l);
        t.comment(l);
      },
    });
    t.comment(`seed: ${JSON.stringify(p)}`);
    t.ok(
      p.new_owner !== null && p.new_owner !== p.drained && p.new_owner.startsWith('cp-'),
      'one other control-plane node owns the VIP',
      { owners: p.owners },
    );
    // The report's failure is the VIP staying on the drained node until it goes away (without
    // drainguard: silenced_s ≈ gone_at_s). The owner at the end alone would not show it.
    t.ok(
      p.silenced_s !== null && p.silenced_s <= p.removed_at_s + FAILSAFE_GRACE_S,
      `the drained node stopped answering at ${p.silenced_s} s: within the fail-safe's grace of its member's removal (${p.removed_at_s} s; node gone at ${p.gone_at_s} s)`,
      { owners: p.owners },
    );
    t.ok(p.dark_s <= 1, `the VIP dark ${p.dark_s} s in all (≤ 1 s)`, { owners: p.owners });
    t.ok(p.dual_s <= 0.1, `answered twice ${p.dual_s} s (≤ 0.1 s)`, { owners: p.owners });
    t.ok(
      lines.some((l) => / sidecar: .* stale API server on this node: fenced /.test(l)),
      "the drained node's sidecar fenced its stale API server",
    );
    // Not asserted (it depends on whether the removed member led etcd: every API server waits
    // for a new leader then), reported: the issue's ≤ 2 s through the VIP, beside what a node
    // that stays answered directly.
    t.comment(
      `targets: silenced ${p.silenced_s} s (member removed at ${p.removed_at_s} s${p.removed_leader ? ', it led etcd' : ''}, node gone at ${p.gone_at_s} s), dark ${p.dark_s} s (≤ 1), dual ${p.dual_s} s (≤ 0.1), API unavailable through the VIP ${p.api_unavailable_s} s (≤ 2; directly from a node that stays: ${p.cluster_api_unavailable_s} s)`,
    );
  },
);
