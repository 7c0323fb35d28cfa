// The L2 handover as a small state machine, pure: what the edge (../feature.ts) and the tests use.
// step.ts holds the step and the table of transitions; model.ts the types; phases.ts one function
// per phase; failsafe.ts the fail-safe and outage policy; fence-plan.ts the fence each phase asks
// for; owners.ts the services and their new owners; schedule.ts when to look again; publish.ts and
// resume.ts the way out to the Node annotation and back after a restart.
export { failsafeDue, peersMayBeBlind } from './failsafe.ts';
export { fenceFor, isClaimWatch } from './fence-plan.ts';
export {
  FROM_FENCE,
  type HandoverPhase,
  initialMemory,
  L2_EVENT_REASONS,
  type L2Action,
  type L2EventReason,
  type L2Memory,
  type L2Observation,
  type L2Settings,
  OWN_WITHDRAWN_GRACE_MS,
  PUBLISHED_PHASE,
  REJOIN_MS,
  RELABEL_MAX_MS,
  SPEAKER_CATCH_UP_MAX_MS,
  type StatusSource,
  someOf,
} from './model.ts';
export { nowhereToGo, vipsOf } from './owners.ts';
export { statusOf } from './publish.ts';
export {
  needsTick,
  STATUS_READ_INTERVAL_MS,
  settled,
  staleServerCheckDue,
  statusReadDue,
} from './schedule.ts';
export { step } from './step.ts';
