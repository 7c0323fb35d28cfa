// The L2 handover's state machine, its step: plain observations and an injected `now` in, the next
// phase and the actions to take out. The I/O edge (../feature.ts) gathers observations, executes
// actions and calls step() again; every action is idempotent, so a repeated step after a crash or
// a failed action is harmless. The model (types, phases, Events) is model.ts.
//
// step() decides in this order:
//   1. drainOver        the node is not draining and the pod not terminating: undo what is left
//                       (phases.ts)
//   2. enterFailsafe    the API has been unreachable for the grace period, or the peers may be
//                       blind: fence anyway (failsafe.ts)
//   3. one function per phase (phases.ts): atRest, labelled, awaitingConfirmation, fenced,
//      failsafeFenced
//
// Every transition (phase → next phase: when; actions, Event reason):
//   any leftover fence or own label     → undoing                drain over, view synced (not a
//                                                                fail-safe with the API still down);
//                                                                unfence first, then unlabel (after a
//                                                                memberlist cut: REJOIN_MS later)
//   undoing                             → idle                   nothing left; L2HandoverUndone
//   idle, refused, given-up             → idle                   drain over, nothing left
//   any but failsafe-fenced,            → failsafe-fenced        draining, API down ≥ grace, other
//     fenced-confirmed                                           speakers may exist; fence with the
//                                                                memberlist cut (none while the pod
//                                                                goes away: its speaker's leave must
//                                                                reach the peers), L2FailsafeFence
//   failsafe-fenced uncut               → (same), cut            the pod stays after all (a restart)
//   awaiting-confirmation               → failsafe-fenced        the peers may be blind: unconfirmed
//                                                                the grace after the label while
//                                                                API requests failed since (a stale
//                                                                API server keeps their watches
//                                                                silent), or 1 s after this node's
//                                                                speaker stopped announcing them;
//                                                                as above, L2FailsafeFence
//   idle, undoing, refused              → refused                some service could go nowhere
//                                                                (never strand a VIP);
//                                                                L2HandoverImpossible, once
//   idle, undoing, refused              → labelled               every service can move; label,
//                                                                L2HandoverStarted
//   given-up                            → given-up               still draining: label kept off
//   given-up                            → (as idle)              the pod terminates: a new attempt
//   labelled                            → awaiting-confirmation  the exclude label is on the Node
//                                                                (labelled again until it is)
//   awaiting-confirmation, overdue      → refused                eligibility lost after the label;
//                                                                unlabel, L2HandoverImpossible
//   awaiting-confirmation, overdue      → fenced-confirmed       every service has a new owner's
//                                                                ServiceL2Status; fence,
//                                                                L2HandoverDone
//   awaiting-confirmation               → fenced-unconfirmed     nothing can confirm (no usable
//                                                                ServiceL2Status): settle time
//                                                                passed; fence,
//                                                                L2HandoverUnconfirmedFence
//   awaiting-confirmation, overdue      → given-up               budget spent unconfirmed while
//                                                                draining; unlabel,
//                                                                L2HandoverUnconfirmed
//   awaiting-confirmation               → overdue                budget spent unconfirmed while
//                                                                terminating: still watching;
//                                                                L2HandoverUnconfirmed
//   fenced-confirmed, -unconfirmed      → (same)                 the fence re-applied if flushed
//   failsafe-fenced                     → refused                API back (the fail-safe ends), some
//                                                                service could go nowhere: fail-safe
//                                                                fence and cut removed, label off;
//                                                                L2HandoverImpossible
//   failsafe-fenced                     → labelled               API back, every service can move:
//                                                                decided again from scratch (budget
//                                                                and settle time from the label), the
//                                                                fail-safe fence kept meanwhile;
//                                                                L2HandoverStarted
//   awaiting-confirmation with the cut  → fenced-confirmed,      as above; the whole fail-safe fence
//                                           -unconfirmed         (drop and memberlist cut) kept until
//                                                                the drain ends (peers see this node
//                                                                dead, so none elects it whatever its
//                                                                label lag); L2HandoverConfirmed or
//                                                                L2HandoverUnconfirmedFence
//   awaiting-confirmation with the cut  → given-up, refused      as above, fail-safe fence and cut
//                                                                removed with the label
// refused and given-up never turn into failsafe-fenced: the fail-safe would overturn a refusal.
//
// The Node annotation publishes each phase as one of shared/l2-state.ts's L2_PHASES
// (model.ts's PUBLISHED_PHASE; refused adds `stranded: true`, given-up `gaveUp: true`).
import { poolRanges } from '../pool-ranges.ts';
import { enterFailsafe, failsafeDue, outageAfter, peersMayBeBlind } from './failsafe.ts';
import {
  type L2Action,
  type L2Memory,
  type L2Observation,
  type L2Settings,
  secs,
  type Turn,
} from './model.ts';
import {
  absorbClaims,
  atRest,
  awaitingConfirmation,
  drainOver,
  failsafeFenced,
  fenced,
  labelled,
} from './phases.ts';

/** One decision: where to go from here, and what to do to get there. */
export function step(
  memory: L2Memory,
  observation: L2Observation,
  settings: L2Settings,
): { memory: L2Memory; actions: L2Action[] } {
  const turn: Turn = {
    observation,
    settings,
    now: observation.now,
    apiUp: observation.apiDownSince === undefined,
    why: observation.terminating ? 'pod terminating' : (observation.drainReason ?? 'draining'),
    actions: [],
  };
  // Pools are remembered: a read that fails later leaves the last known ones.
  const read = observation.pools && observation.pools.length > 0 ? poolRanges(observation.pools) : [];
  const pools = read.length > 0 ? read : memory.pools;
  // Remembered across phases like the pools: the handback waits on it (SPEAKER_CATCH_UP_MAX_MS).
  const apiOutage = outageAfter(memory.apiOutage, observation);
  const kept = { ...(pools ? { pools } : {}), ...(apiOutage ? { apiOutage } : {}) };
  const next = decide(absorbClaims({ ...memory, ...kept }, turn), turn);
  return { memory: { ...next, ...kept }, actions: turn.actions };
}

export function decide(memory: L2Memory, turn: Turn): L2Memory {
  const { observation } = turn;
  // 1. Drain over (uncordoned, not terminating): fence off first, then the label.
  if (!observation.draining && !observation.terminating) return drainOver(memory, turn);
  // 2. Draining or terminating, the API gone for the grace period: fence anyway. Or the peers
  //    may be blind: no confirmation a settle time after the label while API requests failed.
  if (failsafeDue(memory, observation, turn.settings))
    return enterFailsafe(
      memory,
      turn,
      `API unreachable for ${secs(turn.now - (observation.apiDownSince ?? turn.now))} while ${turn.why}`,
    );
  const blind = peersMayBeBlind(memory, observation, turn.settings);
  if (blind !== undefined) return enterFailsafe(memory, turn, blind);
  // 3. Each phase's own step.
  switch (memory.phase) {
    case 'idle':
    case 'undoing':
    case 'refused':
    case 'given-up':
      return atRest(memory, turn);
    case 'labelled':
      return labelled(memory, turn);
    case 'awaiting-confirmation':
    case 'overdue':
      return awaitingConfirmation(memory, turn);
    case 'fenced-confirmed':
    case 'fenced-unconfirmed':
      return fenced(memory, turn);
    case 'failsafe-fenced':
      return failsafeFenced(memory, turn);
  }
}
