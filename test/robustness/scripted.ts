// Trials written by hand (plan.ts TrialPlan.scripted), each reproducing a defect a randomized run
// found, run by name: `make robustness SCRIPTED=<name>`.
import type { TrialPlan } from './plan.ts';

/** By name; each plan's `scripted` is its name. */
export const SCRIPTED: Record<string, Omit<TrialPlan, 'seed'>> = {
  /**
   * Issue 42 item 10, as the randomized run found it: the sidecars answered 429 (API Priority and
   * Fairness throttling their flow) while the speakers' requests pass, and the VIP owner's speaker
   * restarted by its liveness probe (the Lease holder's pod deleted meanwhile). On 2026-11-29 it
   * left the VIP dark 10.6 s (docs/robustness.md, "Trials written by hand").
   */
  'issue-42-item-10': {
    trial: 100,
    scripted: 'issue-42-item-10',
    action: 'delete-leader-pod',
    subject: 'vip-owner',
    faults: [
      { kind: 'api-429', atMs: 0, durationMs: 15_000 },
      { kind: 'liveness-failure', atMs: 1_000, durationMs: 0 },
    ],
  },
};
