// When the edge must look again, pure: the next ServiceL2Status read, the stale API server check,
// whether a tick is needed, and whether the handover has settled (a preStop hook may return).
import {
  type AttemptMemory,
  type L2Memory,
  type L2Observation,
  type L2Settings,
  OWN_WITHDRAWN_GRACE_MS,
} from './model.ts';

/** When the attempt awaiting confirmation began (the handover's, or the fail-safe's new one). */
export function awaitingSince(memory: AttemptMemory): number | undefined {
  if (memory.phase !== 'awaiting-confirmation') return undefined;
  return memory.attemptStartedAt ?? memory.handoverStartedAt;
}

/** A request failed while the attempt ran, or while it was being prepared (its reads can be what failed). */
export function failedSince(
  started: number,
  apiFailedAt: number | undefined,
  settings: Pick<L2Settings, 'failsafeGraceMs'>,
): apiFailedAt is number {
  return apiFailedAt !== undefined && apiFailedAt >= started - settings.failsafeGraceMs;
}

/**
 * Whether to look for a stale API server now, awaiting confirmation: the watches re-opened on new
 * connections and the own Node read consistently, unhedged (a stale server fails the read, which
 * counts toward peersMayBeBlind; a healthy one replays what the watches missed). Once the
 * fail-safe's grace has passed unconfirmed, every grace; once this node's speaker has withdrawn
 * unconfirmed for OWN_WITHDRAWN_GRACE_MS (the VIP may be dark now), every second: each new
 * connection may land on another API server behind the Service, so a stale one is met within a
 * few tries (bench-seed run 6: the peers blind, this sidecar's own requests all reached healthy
 * servers, and the first failure came 8 s after the label; dark 16.9 s).
 */
export function staleServerCheckDue(
  memory: AttemptMemory & Pick<L2Memory, 'ownWithdrawnAt'>,
  now: number,
  lastCheckAt: number,
  settings: Pick<L2Settings, 'failsafeGraceMs'>,
): boolean {
  const started = awaitingSince(memory);
  if (started === undefined) return false;
  const withdrawn = memory.ownWithdrawnAt;
  if (withdrawn !== undefined && now - withdrawn >= OWN_WITHDRAWN_GRACE_MS)
    return now - lastCheckAt >= OWN_WITHDRAWN_GRACE_MS;
  return now - started >= settings.failsafeGraceMs && now - lastCheckAt >= settings.failsafeGraceMs;
}

/** How often MetalLB's statuses are read consistently while statusReadDue holds. */
export const STATUS_READ_INTERVAL_MS = 1_000;

/**
 * Whether MetalLB's ServiceL2Status objects are to be read consistently now: awaiting confirmation
 * while API requests have failed since the attempt began (or while it was prepared, as
 * peersMayBeBlind counts them), at most every STATUS_READ_INTERVAL_MS. The watch a confirmation
 * arrives on may sit on a stale API server: the new owner announces, this node's own speaker may
 * not have seen the label either (dual answers), and only a consistent read can tell.
 */
export function statusReadDue(
  memory: AttemptMemory,
  apiFailedAt: number | undefined,
  now: number,
  lastReadAt: number,
  settings: Pick<L2Settings, 'failsafeGraceMs'>,
): boolean {
  const started = awaitingSince(memory);
  if (started === undefined || !failedSince(started, apiFailedAt, settings)) return false;
  return now - lastReadAt >= STATUS_READ_INTERVAL_MS;
}

/** Phases in which step() depends on time passing (the edge ticks while in them). */
export function needsTick(
  memory: L2Memory,
  observation: Pick<L2Observation, 'draining' | 'terminating' | 'apiDownSince'>,
): boolean {
  const handoverWanted = observation.draining || observation.terminating;
  if (handoverWanted && observation.apiDownSince !== undefined && memory.phase !== 'failsafe-fenced')
    return true;
  return (
    memory.phase === 'labelled' ||
    memory.phase === 'awaiting-confirmation' ||
    memory.phase === 'overdue' ||
    (memory.phase === 'undoing' &&
      (memory.cutLiftedAt !== undefined || memory.apiOutage?.backAt !== undefined))
  );
}

/** The handover is as far as it goes (for /prestop): fenced, or refused. */
export function settled(memory: L2Memory): boolean {
  // Not given-up: /prestop waits only once the pod is going away, and then a new attempt starts.
  return (
    memory.phase === 'fenced-confirmed' ||
    memory.phase === 'fenced-unconfirmed' ||
    memory.phase === 'failsafe-fenced' ||
    memory.phase === 'refused'
  );
}
