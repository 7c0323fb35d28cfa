// The L2 handover's memory rebuilt on start, pure: from what survives a restart of the sidecar —
// the Node annotation (shared/l2-state.ts) and the nft fence read back (fence.ts) — to the core's
// L2Memory (model.ts). Nothing else survives: what the last process knew only in memory (an API
// outage and its hold, the candidates) is gone, and the resumed memory errs on the safe side
// (assumedOutage).
import type { L2State, ServiceVips } from '../../../shared/l2-state.ts';
import type { FenceSpec } from '../fence.ts';
import { isClaimWatch } from './fence-plan.ts';
import { FROM_FENCE, type HandoverPhase, initialMemory, type L2Memory } from './model.ts';

/**
 * The API outage a resumed process that finds its own exclude label assumes (model.ts
 * L2Memory.apiOutage): one of unknown length that ended at its start. The hold that keeps the own exclude label at the drain's end for twice
 * an outage (SPEAKER_CATCH_UP_MAX_MS at most) lived in the last process's memory; restarted
 * during an outage, or after one while this node's speaker may still be in its watches' backoff,
 * a process that unlabelled at once let the speaker announce beside the new owner before it saw
 * the label go (robustness seed 112 trial 55: dual 3.17 s after the uncordon). Nothing read back
 * proves there was none (the annotation cannot be written during one), so the longest catch-up
 * counts: the label stays until 30 s after this start — or after the API answers again, if this
 * process sees the outage go on (it continues this one: its start is unknown). A drain that ends
 * later than that, the API up since, is handed back at once.
 */
export const assumedOutage = (now: number): NonNullable<L2Memory['apiOutage']> => ({
  since: Number.NEGATIVE_INFINITY,
  backAt: now,
});

/**
 * Memory rebuilt on start from the Node annotation and the installed fence. `ownLabel`: the exclude
 * label drainguard added is on the Node as read at the start; undefined when the Node could not
 * be read (then it may be: assumedOutage counts as for a label found).
 */
export function resume(
  status: L2State | undefined,
  fence: FenceSpec | undefined,
  now: number,
  ownLabel?: boolean,
): L2Memory {
  const pools = status?.pools ?? fence?.pools;
  // A fence that cuts memberlist is the fail-safe's, fired only with the API unreachable: proof of
  // an outage whose end this process did not see, label or not. Without it, a replacement pod
  // started after the API came back put the label back and lifted the cut at once, while a peer's
  // speaker still backed off its Node watch with a view from before the label (robustness SEED=66
  // TRIAL=0: dark 3.1 s until node-b relisted).
  const cut = (fence?.memberlistPorts.length ?? 0) > 0;
  const memory: L2Memory = {
    ...initialMemory(now),
    ...(pools && pools.length > 0 ? { pools } : {}),
    ...(ownLabel !== false || cut ? { apiOutage: assumedOutage(now) } : {}),
  };
  const t = (iso: string | undefined) => {
    const n = iso ? Date.parse(iso) : Number.NaN;
    return Number.isNaN(n) ? undefined : n;
  };
  const services = status?.services ?? [];
  const fromFence = (f: FenceSpec): ServiceVips[] =>
    services.length > 0
      ? services
      : [{ service: FROM_FENCE, ips: [...f.vips4, ...f.vips6, ...(f.held ?? [])] }];
  const handingOver = status?.phase === 'labelled' || status?.phase === 'awaiting-confirmation';
  if (fence?.held && isClaimWatch(fence) && (handingOver || !status)) {
    // The handover's claim watch: still awaiting its new owners.
    return {
      ...memory,
      phase: 'labelled',
      since: t(status?.since) ?? now,
      handoverStartedAt: t(status?.handoverStartedAt) ?? now,
      services: fromFence(fence),
      fence,
    };
  }
  if (fence) {
    // The annotation does not tell a confirmed fence from one after the settle time: "fenced"
    // counts as confirmed (the fail-safe then leaves it alone). A fence with the memberlist cut is
    // the fail-safe's: kept after the handover (until the drain ends) when the annotation says so
    // (`memberlistCut` while "fenced"); otherwise — no annotation, or one written before the
    // fail-safe (none is written while the API is down) — decided again once the API answers.
    const cut = fence.memberlistPorts.length > 0;
    const phase: HandoverPhase =
      status?.phase === 'fenced' && (!cut || status.memberlistCut === true)
        ? 'fenced-confirmed'
        : cut
          ? 'failsafe-fenced'
          : 'fenced-unconfirmed';
    return {
      ...memory,
      phase,
      since: t(status?.since) ?? now,
      handoverStartedAt: t(status?.handoverStartedAt) ?? now,
      services: fromFence(fence),
      handedTo: status?.handedTo ?? {},
      fence,
    };
  }
  if (status && (status.phase === 'labelled' || status.phase === 'awaiting-confirmation')) {
    return {
      ...memory,
      phase: 'labelled',
      since: t(status.since) ?? now,
      handoverStartedAt: t(status.handoverStartedAt) ?? now,
      services,
    };
  }
  // Given up before a restart: not retried until the drain ends (drainOver resets it).
  if (status?.phase === 'idle' && status.gaveUp) return { ...memory, phase: 'given-up' };
  return memory;
}
