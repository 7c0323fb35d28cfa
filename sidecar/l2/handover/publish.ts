// What the Node annotation publishes of the machine's memory (shared/l2-state.ts's L2State); the
// way back after a restart is resume.ts.
import type { L2State } from '../../../shared/l2-state.ts';
import { fenceIsEmpty } from '../fence.ts';
import { cuts } from './fence-plan.ts';
import { FAILSAFE_KEPT, type L2Memory, PUBLISHED_PHASE } from './model.ts';
import { vipsOf } from './owners.ts';

export function statusOf(memory: L2Memory, observeOnly: boolean): L2State {
  const phase = PUBLISHED_PHASE[memory.phase];
  return {
    phase,
    since: new Date(memory.since).toISOString(),
    ...(memory.handoverStartedAt !== undefined
      ? { handoverStartedAt: new Date(memory.handoverStartedAt).toISOString() }
      : {}),
    vips: vipsOf(memory.services),
    services: memory.services,
    handedTo: memory.handedTo,
    fenced:
      memory.fence !== undefined &&
      !fenceIsEmpty(memory.fence) &&
      (phase === 'fenced' || phase === 'failsafe-fenced'),
    failsafe: phase === 'failsafe-fenced',
    interfaces: memory.fence?.interfaces ?? [],
    ...(memory.pools ? { pools: memory.pools } : {}),
    ...(memory.fence?.pools ? { failsafeDrop: 'pools' as const } : {}),
    ...(memory.fence?.ownAddresses ? { failsafeDrop: 'foreign' as const } : {}),
    ...(cuts(memory.fence) ? { memberlistCut: true } : {}),
    ...(memory.fence?.held ? { held: memory.fence.held } : {}),
    ...(keptAfterFailsafe(memory) ? { failsafeKept: FAILSAFE_KEPT } : {}),
    ...(memory.phase === 'refused' ? { stranded: true } : {}),
    ...(memory.phase === 'given-up' ? { gaveUp: true } : {}),
    ...(observeOnly ? { observeOnly: true } : {}),
  };
}

/** Fenced, the handover confirmed (or settled), with the fail-safe fence and its cut still on. */
export const keptAfterFailsafe = (memory: L2Memory) =>
  (memory.phase === 'fenced-confirmed' || memory.phase === 'fenced-unconfirmed') && cuts(memory.fence);
