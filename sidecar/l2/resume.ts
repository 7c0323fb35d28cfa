// The L2 handover's memory rebuilt on start, pure: from what survives a restart of the sidecar —
// the Node annotation (shared/l2-state.ts) and the nft fence read back (fence.ts) — to the core's
// L2Memory (core.ts). Nothing else survives: what the last process knew only in memory (an API
// outage and its hold, the candidates) is gone, and the resumed memory errs on the safe side.
import type { L2State, ServiceVips } from '../../shared/l2-state.ts';
import { FROM_FENCE, type HandoverPhase, initialMemory, isClaimWatch, type L2Memory } from './core.ts';
import type { FenceSpec } from './fence.ts';

/** Memory rebuilt on start from the Node annotation and the installed fence. */
export function resume(status: L2State | undefined, fence: FenceSpec | undefined, now: number): L2Memory {
  const pools = status?.pools ?? fence?.pools;
  const memory: L2Memory = { ...initialMemory(now), ...(pools && pools.length > 0 ? { pools } : {}) };
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
