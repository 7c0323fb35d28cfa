// The L2 handover's model, pure: its settings and timing constants, what the edge observes, what
// the machine remembers between steps, its phases (and the published ones), the actions and Event
// reasons it emits, and the small helpers every phase uses to enter a phase and queue actions.
// The transitions are listed at the head of step.ts.
import type { L2Phase, ServiceVips } from '../../../shared/l2-state.ts';
import { type FenceSpec, fenceIsEmpty, sameFence } from '../fence.ts';
import { LABEL_EVENT_REASONS } from '../label-guard.ts';

export interface L2Settings {
  handoverBudgetMs: number;
  /** Without usable ServiceL2Status (MetalLB < 0.14.4, say): wait this long instead of confirming. */
  settleMs: number;
  failsafeGraceMs: number;
  memberlistPorts: number[];
  nodeName: string;
}

/**
 * At the drain's end after a fail-safe, how long the exclude label stays after the fence (and its
 * memberlist cut) came off: this node's speaker and its peers rejoin memberlist meanwhile (MetalLB
 * rejoins when the speaker's own Node changes — the status annotation written with the unfence —
 * and every minute). Unlabelled at once, this node's speaker, still alone in its memberlist, would
 * elect itself for every VIP and answer along with the new owners until it rejoins.
 */
export const REJOIN_MS = 10_000;

/** At the drain's end, how long a cut fence waits for the exclude label put back before it (drainOver). */
export const RELABEL_MAX_MS = 10_000;

/**
 * At the drain's end after an API outage, the exclude label stays for twice the outage (at most
 * this long) after the API answered again. This node's speaker lost its watches in the same
 * outage and re-opens them on an exponential backoff (client-go's reflector: 0.8 s doubling, up
 * to 30 s, jittered), so its next try comes up to about twice the outage after it began. Had the
 * label gone at once, the new owner's speaker, seeing it go, withdrew while this node's speaker
 * still saw the label: nobody announced (robustness SEED=5 TRIAL=2, dark 1.1 s).
 * An outage that begins while the last one's hold runs continues it (outageAfter): the speaker
 * may not have caught up yet, and its backoff grows on. Counted on its own, a short second
 * outage cut the hold of a long first one (robustness SEED=90 TRIAL=21, dark 1.9 s).
 */
export const SPEAKER_CATCH_UP_MAX_MS = 30_000;

/**
 * Awaiting confirmation after API failures, this node's own speaker has stopped announcing every
 * VIP handed over and no new owner confirmed for this long (a takeover normally shows within
 * ~1 s): the VIP is likely dark now, and the peers blind (their watches on a stale API server never
 * showed them the label). peersMayBeBlind does not wait the rest of the fail-safe grace then:
 * only the memberlist cut reaches blind peers, and their failure detection takes seconds more
 * (bench-seed run 5, member removed at the cordon: dark 9.85 s, the cut 5 s after the label).
 */
export const OWN_WITHDRAWN_GRACE_MS = 1_000;

export type AttemptMemory = Pick<L2Memory, 'phase' | 'attemptStartedAt' | 'handoverStartedAt'>;

/**
 * Why a fail-safe fence is kept after the handover is confirmed (status `failsafeKept`, Events):
 * lifting the memberlist cut is safe only once every peer sees the exclude label, and nothing
 * proves that (a confirmation written after the label may come from a peer still processing an
 * older Node event).
 */
export const FAILSAFE_KEPT =
  'fail-safe fence and memberlist cut kept until the drain ends: peers that cannot reach this node over memberlist treat it as dead, while a peer whose API view lags (however long) would hear it alive, see it not excluded, re-elect it and leave the VIP dark behind the fence';

/**
 * Where the VIPs announced here and their new owners are read from: MetalLB's ServiceL2Status
 * objects; every LoadBalancer Service (no CRD, or nothing usable written in it: nothing can
 * confirm, the fence waits the settle time); or not known yet.
 */
export type StatusSource = 'servicel2status' | 'services' | 'unknown';

export interface L2Observation {
  now: number;
  draining: boolean;
  terminating: boolean;
  drainReason: string | undefined;
  /** The own Node and Pod have been read at least once. */
  synced: boolean;
  apiDownSince: number | undefined;
  /**
   * When a request last failed as if the API were down (timed out, 5xx, unreachable), even if
   * the API answered again since; undefined if never.
   */
  apiFailedAt?: number | undefined;
  excludeLabel: boolean;
  labelOwned: boolean;
  statusSource: StatusSource;
  /**
   * MetalLB's view alone is synced (part of `synced`); undefined counts as synced. A pod going
   * away labels without a synced Node view (the label is the safe move: nothing is fenced before
   * a confirmation), but the handover concludes nothing before this one: a ServiceL2Status list
   * still on its way shows nothing announced here, and "nothing to hand over" would be "done".
   */
  metallbSynced?: boolean;
  /** What this node announces now (own ServiceL2Status objects; all LB services without them). */
  announced: ServiceVips[];
  /** service -> another node that has a ServiceL2Status for it (the new owner). */
  newOwners: Record<string, string>;
  /** Nodes other than this one that could announce; undefined = not known (API down). */
  otherCandidates: string[] | undefined;
  /**
   * Per service announced here, the other nodes MetalLB would let announce it (eligibility.ts:
   * ready endpoints for `externalTrafficPolicy: Local`, L2Advertisement node selectors). A
   * service missing here is judged by `otherCandidates`.
   */
  serviceCandidates?: Record<string, string[]>;
  /** The last preStop hook, taken for a deletion, was a restart seen here (DrainState.hookRestartSeen). */
  hookRestartSeen?: boolean;
  /** Interfaces to fence. */
  interfaces: string[];
  /**
   * The node's own addresses (`ip addr`), read while the fail-safe is due or on; undefined when
   * not read. The fail-safe fence drops every ARP/NA not from them.
   */
  ownAddresses?: string[] | undefined;
  /**
   * MetalLB's address pools (IPAddressPool `spec.addresses` entries) as last read successfully;
   * undefined when never read. The fail-safe fence then drops only ARP/NA in them.
   */
  pools?: string[] | undefined;
  /**
   * After a fail-safe, with the API back: services it covered that no longer exist (deleted
   * meanwhile). Nothing is left to hand over for them.
   */
  goneServices?: string[];
  /** The fence installed now (read back from nft), or undefined. */
  fence: FenceSpec | undefined;
}

/** What each phase of the core is published as in the Node annotation (one of L2_PHASES). */
export const PUBLISHED_PHASE = {
  idle: 'idle',
  /** Refused: no other node could announce some VIP (never strand a VIP); `stranded: true`. */
  refused: 'idle',
  /**
   * Given up: nobody confirmed within the budget while the node drains (the pod is not going
   * away), so the label came off and this node announces again; not retried until the drain
   * ends. `gaveUp: true`.
   */
  'given-up': 'idle',
  labelled: 'labelled',
  'awaiting-confirmation': 'awaiting-confirmation',
  /** Budget spent unconfirmed while the pod terminates: warned once, still watching. */
  overdue: 'awaiting-confirmation',
  /** Another node's ServiceL2Status confirmed every service. */
  'fenced-confirmed': 'fenced',
  /** Fenced after the settle time: nothing could confirm (no usable ServiceL2Status). */
  'fenced-unconfirmed': 'fenced',
  'failsafe-fenced': 'failsafe-fenced',
  undoing: 'undoing',
} as const satisfies Record<string, L2Phase>;

export type HandoverPhase = keyof typeof PUBLISHED_PHASE;

export interface L2Memory {
  phase: HandoverPhase;
  /** When the current published phase was entered (epoch ms). */
  since: number;
  handoverStartedAt: number | undefined;
  /** Services being handed over (snapshot from the start, grown by any announced later). */
  services: ServiceVips[];
  handedTo: Record<string, string>;
  /** The fence this phase wants installed. */
  fence: FenceSpec | undefined;
  /** After a fail-safe: when the new attempt began (budget and settle time count from it). */
  attemptStartedAt?: number;
  /** Undoing after a fail-safe: when the fence with its memberlist cut came off (REJOIN_MS). */
  cutLiftedAt?: number;
  /** MetalLB's address pools as merged ranges (pool-ranges.ts), remembered from the last read. */
  pools?: string[];
  /**
   * The last API outage seen: when it began and, once over, when the API answered again (one that
   * began within the hold of the one before counts from that one's start: SPEAKER_CATCH_UP_MAX_MS).
   */
  apiOutage?: { since: number; backAt?: number };
  /**
   * Awaiting confirmation: since when this node's own speaker announces none of the services
   * handed over (its ServiceL2Status objects gone) with no new owner confirmed (OWN_WITHDRAWN_GRACE_MS).
   */
  ownWithdrawnAt?: number | undefined;
  /** Fenced: since when the exclude label has been missing (label-guard.ts). */
  labelLostAt?: number | undefined;
}

/** Reasons of the Events the handover records on its Node and pod. */
export const L2_EVENT_REASONS = {
  started: 'L2HandoverStarted',
  impossible: 'L2HandoverImpossible',
  done: 'L2HandoverDone',
  unconfirmed: 'L2HandoverUnconfirmed',
  unconfirmedFence: 'L2HandoverUnconfirmedFence',
  confirmed: 'L2HandoverConfirmed',
  failsafeFence: 'L2FailsafeFence',
  /**
   * Another node claimed a VIP held here (the fail-safe's, or the handover's claim watch) on the
   * wire: dropped here since.
   */
  vipClaimed: 'L2VipClaimed',
  /** Interfaces named for the fence are not on this node (recorded by the edge). */
  interfacesMissing: 'L2FenceInterfacesMissing',
  /** The status annotation read back on start is malformed: ignored (recorded by the edge). */
  stateInvalid: 'L2StateInvalid',
  ...LABEL_EVENT_REASONS,
  undone: 'L2HandoverUndone',
} as const;

export type L2EventReason = (typeof L2_EVENT_REASONS)[keyof typeof L2_EVENT_REASONS];

export type L2Action =
  | { kind: 'label' }
  | { kind: 'unlabel' }
  | { kind: 'fence'; spec: FenceSpec }
  | { kind: 'unfence' }
  | { kind: 'event'; type: 'Normal' | 'Warning'; reason: L2EventReason; message: string };

export const initialMemory = (now: number): L2Memory => ({
  phase: 'idle',
  since: now,
  handoverStartedAt: undefined,
  services: [],
  handedTo: {},
  fence: undefined,
});

export const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** Candidates named in an Event: a few, then a count (among 5,000 Nodes a message must stay short). */
export function someOf(names: readonly string[], shown = 5): string {
  if (names.length <= shown) return names.join(', ');
  return `${names.slice(0, shown).join(', ')} and ${names.length - shown} more`;
}

/** `since` moves only when the published phase changes (it is what `drainguard status` shows). */
export const enter = (memory: L2Memory, phase: HandoverPhase, now: number): L2Memory =>
  memory.phase === phase
    ? memory
    : {
        ...memory,
        phase,
        since: PUBLISHED_PHASE[memory.phase] === PUBLISHED_PHASE[phase] ? memory.since : now,
      };

/** One step's inputs and the actions it collects. */
export interface Turn {
  observation: L2Observation;
  settings: L2Settings;
  now: number;
  apiUp: boolean;
  /** Why a handover is wanted, for Events. */
  why: string;
  actions: L2Action[];
}

export const event = (turn: Turn, type: 'Normal' | 'Warning', reason: L2EventReason, message: string) =>
  turn.actions.push({ kind: 'event', type, reason, message });

export const atRestPhases: readonly HandoverPhase[] = ['idle', 'refused', 'given-up'];

/** Refused under way: label (if ours) and any fence off, L2HandoverImpossible. */
export function refuse(turn: Turn, message: string): L2Memory {
  takeLabelBack(turn);
  dropFence(turn);
  event(turn, 'Warning', L2_EVENT_REASONS.impossible, message);
  return { ...initialMemory(turn.now), phase: 'refused' };
}

/** Removes whatever fence is installed (a fail-safe's, when its handover is refused or given up). */
export function dropFence(turn: Turn): void {
  if (turn.observation.fence) turn.actions.push({ kind: 'unfence' });
}

/** Removes the exclude label if drainguard added it and it is there (and the API answers). */
export function takeLabelBack(turn: Turn): void {
  const { observation } = turn;
  if (observation.labelOwned && observation.excludeLabel && turn.apiUp)
    turn.actions.push({ kind: 'unlabel' });
}

export function ensureFence(turn: Turn, spec: FenceSpec): void {
  const installed = turn.observation.fence;
  if (fenceIsEmpty(spec)) {
    if (installed) turn.actions.push({ kind: 'unfence' });
  } else if (!installed || !sameFence(installed, spec)) {
    turn.actions.push({ kind: 'fence', spec });
  }
}

/** The services of a fence found without the Node annotation: their names are not known. */
export const FROM_FENCE = '(from fence)';
