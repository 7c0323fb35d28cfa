// The L2 handover decision core, pure: plain observations and an injected `now` in, the next
// phase and the actions to take out. The I/O edge (feature.ts) gathers observations,
// executes actions and calls step() again; every action is idempotent, so a repeated step
// after a crash or a failed action is harmless.
//
// step() decides in this order, each a function below:
//   1. drainOver        the node is not draining and the pod not terminating: undo what is left
//   2. enterFailsafe    the API has been unreachable for the grace period: fence anyway
//   3. one function per phase: atRest, labelled, awaitingConfirmation, fenced, failsafeFenced
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
// (PUBLISHED_PHASE below; refused adds `stranded: true`, given-up `gaveUp: true`).
import type { L2Phase, L2State, ServiceVips } from '../../shared/l2-state.ts';
import { claimedVips, type FenceSpec, fenceIsEmpty, normalizeFence, sameFence } from './fence.ts';
import { fencedLabel, LABEL_EVENT_REASONS } from './label-guard.ts';
import { poolRanges } from './pool-ranges.ts';

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

type AttemptMemory = Pick<L2Memory, 'phase' | 'attemptStartedAt' | 'handoverStartedAt'>;

/** When the attempt awaiting confirmation began (the handover's, or the fail-safe's new one). */
function awaitingSince(memory: AttemptMemory): number | undefined {
  if (memory.phase !== 'awaiting-confirmation') return undefined;
  return memory.attemptStartedAt ?? memory.handoverStartedAt;
}

/** A request failed while the attempt ran, or while it was being prepared (its reads can be what failed). */
function failedSince(
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

/**
 * Why a fail-safe fence is kept after the handover is confirmed (status `failsafeKept`, Events):
 * lifting the memberlist cut is safe only once every peer sees the exclude label, and nothing
 * proves that (a confirmation written after the label may come from a peer still processing an
 * older Node event).
 */
const FAILSAFE_KEPT =
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

const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
/** Candidates named in an Event: a few, then a count (among 5,000 Nodes a message must stay short). */
export function someOf(names: readonly string[], shown = 5): string {
  if (names.length <= shown) return names.join(', ');
  return `${names.slice(0, shown).join(', ')} and ${names.length - shown} more`;
}
export const vipsOf = (services: ServiceVips[]) => [...new Set(services.flatMap((s) => s.ips))].sort();

function mergeServices(a: ServiceVips[], b: ServiceVips[]): ServiceVips[] {
  const m = new Map<string, Set<string>>();
  for (const s of [...a, ...b]) {
    const ips = m.get(s.service) ?? new Set<string>();
    for (const ip of s.ips) ips.add(ip);
    m.set(s.service, ips);
  }
  return [...m]
    .map(([service, ips]) => ({ service, ips: [...ips].sort() }))
    .sort((x, y) => x.service.localeCompare(y.service));
}

export function fenceFor(
  services: ServiceVips[],
  interfaces: string[],
  memberlistPorts: number[],
  ownAddresses?: string[],
  pools?: string[],
): FenceSpec {
  const vips = vipsOf(services);
  return normalizeFence({
    ...byFamily(vips),
    interfaces,
    memberlistPorts,
    ...(pools ? { pools } : ownAddresses ? { ownAddresses } : {}),
  });
}

/** Whether this fence cuts memberlist (the fail-safe's, still on). */
const cuts = (fence: FenceSpec | undefined) => (fence?.memberlistPorts.length ?? 0) > 0;

/**
 * The memberlist ports a fail-safe fence cuts. None while the pod is going away: its speaker
 * exits once the preStop hook returns (a fail-safe fence settles it) and sends memberlist's
 * `leave` on the way out, which the cut would drop, so peers would wait for failure detection
 * (~5 s) instead (seed 79 trial 20: dark 4.78 s). A stop that is a restart (the new speaker would
 * rejoin memberlist, and peers whose API view lacks the label re-elect it behind the fence) or a
 * drain keeps the cut.
 */
const failsafeCut = (
  observation: Pick<L2Observation, 'terminating'>,
  settings: Pick<L2Settings, 'memberlistPorts'>,
) => (observation.terminating ? [] : settings.memberlistPorts);

/** `since` moves only when the published phase changes (it is what `drainguard status` shows). */
const enter = (memory: L2Memory, phase: HandoverPhase, now: number): L2Memory =>
  memory.phase === phase
    ? memory
    : {
        ...memory,
        phase,
        since: PUBLISHED_PHASE[memory.phase] === PUBLISHED_PHASE[phase] ? memory.since : now,
      };

/** One step's inputs and the actions it collects. */
interface Turn {
  observation: L2Observation;
  settings: L2Settings;
  now: number;
  apiUp: boolean;
  /** Why a handover is wanted, for Events. */
  why: string;
  actions: L2Action[];
}

const event = (turn: Turn, type: 'Normal' | 'Warning', reason: L2EventReason, message: string) =>
  turn.actions.push({ kind: 'event', type, reason, message });

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

/**
 * Held VIPs (answered here until another node claims them: the fail-safe's, the claim watch's) that the kernel saw
 * claimed are dropped outright from now on: the fence this phase wants says so, and its re-render
 * (one nft transaction) loses nothing the kernel already drops.
 */
function absorbClaims(memory: L2Memory, turn: Turn): L2Memory {
  const fence = memory.fence;
  const claimed = claimedVips(turn.observation.fence).filter((v) => fence?.held?.includes(v));
  if (!fence || claimed.length === 0) return memory;
  event(
    turn,
    'Normal',
    L2_EVENT_REASONS.vipClaimed,
    `another node claimed ${claimed.join(', ')} on the wire (its gratuitous ARP or unsolicited NA arrived here): this node's ARP/NA for ${claimed.length === 1 ? 'it' : 'them'} dropped since`,
  );
  return { ...memory, fence: dropOutright(fence, claimed) };
}

/** The fence with these held VIPs (all when none named) dropped outright instead. */
function dropOutright(fence: FenceSpec, vips: string[] = fence.held ?? []): FenceSpec {
  const added = byFamily(vips);
  // normalizeFence takes what is dropped outright out of `held`.
  return normalizeFence({
    ...fence,
    vips4: [...fence.vips4, ...added.vips4],
    vips6: [...fence.vips6, ...added.vips6],
    claimed: [],
  });
}

/** VIPs as a fence lists them, by family. */
function byFamily(vips: readonly string[]): Pick<FenceSpec, 'vips4' | 'vips6'> {
  return { vips4: vips.filter((v) => !v.includes(':')), vips6: vips.filter((v) => v.includes(':')) };
}

function outageAfter(
  last: L2Memory['apiOutage'],
  observation: Pick<L2Observation, 'now' | 'apiDownSince'>,
): L2Memory['apiOutage'] {
  const down = observation.apiDownSince;
  if (down !== undefined) {
    // Still the same outage (apiDownSince moves on when the view changes meanwhile: the fail-safe's
    // grace restarts), or a new one within the last one's hold: from the first one's start.
    const continued = last !== undefined && (last.backAt === undefined || down < speakerCatchUpUntil(last));
    return { since: continued ? Math.min(last.since, down) : down };
  }
  if (last && last.backAt === undefined) return { since: last.since, backAt: observation.now };
  return last;
}

/** Until when the label stays at the drain's end after an outage (SPEAKER_CATCH_UP_MAX_MS). */
function speakerCatchUpUntil(outage: L2Memory['apiOutage']): number {
  if (outage?.backAt === undefined) return Number.NEGATIVE_INFINITY;
  return outage.backAt + Math.min(2 * (outage.backAt - outage.since), SPEAKER_CATCH_UP_MAX_MS);
}

function decide(memory: L2Memory, turn: Turn): L2Memory {
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

const atRestPhases: readonly HandoverPhase[] = ['idle', 'refused', 'given-up'];

function drainOver(memory: L2Memory, turn: Turn): L2Memory {
  const { observation, now, apiUp } = turn;
  const ownLabel = observation.labelOwned && observation.excludeLabel;
  const leftovers = observation.fence !== undefined || ownLabel;
  if (atRestPhases.includes(memory.phase) && !leftovers) return enter(memory, 'idle', now);
  // "Not draining" is only known from a synced view of an existing Node: a restart during an
  // API outage (or a Node that is gone) must not undo a fence or label, and the fail-safe stays
  // until the API is back.
  if (!observation.synced) return memory;
  // A fail-safe fenced for a hook taken for a deletion (the own Pod unreadable) that was a
  // restart after all: lifted at once, the restarted speaker is still the owner (issue 42, item 10).
  if (memory.phase === 'failsafe-fenced' && !apiUp && !observation.hookRestartSeen) return memory;
  const undoing = enter(memory, 'undoing', now);
  if (observation.fence) {
    // A memberlist cut lifted with no exclude label on the Node: this node's speaker, alone in its
    // memberlist, answers every VIP along with their owners until it rejoins (robustness SEED=66
    // TRIAL=0: dual 245 ms, a replacement pod resuming the fail-safe after the label had gone).
    // The label goes back first and the fence comes off once it is seen; bounded, so a label
    // that cannot be written does not keep the fence.
    if (cuts(observation.fence) && !observation.excludeLabel && now - undoing.since < RELABEL_MAX_MS) {
      if (apiUp) turn.actions.push({ kind: 'label' });
      return undoing;
    }
    turn.actions.push({ kind: 'unfence' });
    // The label stays while memberlist rejoins (REJOIN_MS).
    return { ...undoing, cutLiftedAt: cuts(observation.fence) ? now : undefined };
  }
  if (ownLabel) {
    if (memory.cutLiftedAt !== undefined && now - memory.cutLiftedAt < REJOIN_MS) return undoing;
    if (now < speakerCatchUpUntil(memory.apiOutage)) return undoing;
    if (apiUp) turn.actions.push({ kind: 'unlabel' });
    return undoing;
  }
  event(
    turn,
    'Normal',
    L2_EVENT_REASONS.undone,
    'drain over: fence removed, exclude label removed if drainguard had added it',
  );
  return initialMemory(now);
}

function enterFailsafe(memory: L2Memory, turn: Turn, cause: string): L2Memory {
  const { observation, settings, now } = turn;
  const services = mergeServices(memory.services, observation.announced);
  // Cut off from memberlist, the speaker hears no peer and announces every VIP its pools allow:
  // drop ARP/NA in MetalLB's pools (remembered from the last read), not only the VIPs it had;
  // pools never read: every ARP/NA not from the node's own addresses. The VIPs announced here are
  // held (answered on) until another node claims them on the wire, unless a new owner is known
  // already: fenced at once, they were dark until the peers declared this node dead.
  const owned = confirmations(services, observation);
  const base = fenceFor(
    services.filter((s) => owned[s.service]),
    observation.interfaces,
    failsafeCut(observation, settings),
    observation.ownAddresses,
    memory.pools,
  );
  // What the fence on now drops stays dropped (fenced after the settle time, or claimed): held
  // again, it would be answered beside the owner that took it over before the fail-safe.
  const spec = normalizeFence({
    ...base,
    vips4: [...base.vips4, ...(memory.fence?.vips4 ?? [])],
    vips6: [...base.vips6, ...(memory.fence?.vips6 ?? [])],
    held: vipsOf(services.filter((s) => !owned[s.service])),
  });
  const cutText = cuts(spec)
    ? `cut memberlist ports ${settings.memberlistPorts.join(', ')} so peers re-elect without this node`
    : `left memberlist uncut: the pod is going away, and its speaker's leave on exit makes the peers re-elect at once`;
  ensureFence(turn, spec);
  const vips = vipsOf(services).join(', ') || '(none known)';
  const held = spec.held ?? [];
  const heldText =
    held.length > 0
      ? `; ${held.join(', ')} answered here until another node claims ${held.length === 1 ? 'it' : 'them'} on the wire (a takeover's gratuitous ARP or unsolicited NA), then dropped`
      : '';
  const fencedWhat = spec.pools
    ? `ARP/NA in MetalLB's address pools ${spec.pools.join(', ')} (VIPs announced here: ${vips}${heldText})`
    : spec.ownAddresses
      ? `every ARP/NA not from this node's own addresses (MetalLB's address pools never read; VIPs announced here: ${vips}${heldText})`
      : `VIPs ${vips}${heldText}`;
  event(
    turn,
    'Warning',
    L2_EVENT_REASONS.failsafeFence,
    `${cause}: fenced ${fencedWhat} on ${observation.interfaces.join(', ') || '(no interface)'} and ${cutText}`,
  );
  return {
    ...enter(memory, 'failsafe-fenced', now),
    services,
    fence: spec,
    handoverStartedAt: memory.handoverStartedAt ?? now,
  };
}

/** Idle, undoing, refused or given up while a handover is wanted: start one if every VIP can move. */
function atRest(memory: L2Memory, turn: Turn): L2Memory {
  const { observation, now } = turn;
  // Refused or given up: no fence either (a fail-safe's removal may have failed).
  if (memory.phase === 'refused' || memory.phase === 'given-up') dropFence(turn);
  if (memory.phase === 'given-up' && !observation.terminating) {
    // Given up while the drain lasts: keep the label off (the removal may have failed).
    takeLabelBack(turn);
    return memory;
  }
  if (!observation.synced && !observation.terminating) return memory;
  if (observation.otherCandidates === undefined) return memory;
  const stuck = nowhereToGo(observation.announced, observation);
  if (stuck !== undefined) {
    if (memory.phase === 'refused') return memory;
    event(
      turn,
      'Warning',
      L2_EVENT_REASONS.impossible,
      `${turn.why}, but ${stuck}: not labelling, not fencing (never strand a VIP)`,
    );
    return enter(memory, 'refused', now);
  }
  const services = mergeServices([], observation.announced);
  // The claim watch first: a new owner may take over the moment the label is seen.
  const watch = claimWatch(services, observation.interfaces);
  if (watch) ensureFence(turn, watch);
  if (!observation.excludeLabel) turn.actions.push({ kind: 'label' });
  event(
    turn,
    'Normal',
    L2_EVENT_REASONS.started,
    `${turn.why}: handing over VIPs ${vipsOf(services).join(', ') || '(none announced here)'} to one of ${someOf(observation.otherCandidates)}`,
  );
  return {
    ...enter(memory, 'labelled', now),
    handoverStartedAt: now,
    services,
    handedTo: {},
    fence: watch,
  };
}

/**
 * While the handover awaits its new owners: a fence that drops nothing yet but holds the VIPs
 * announced here, so the kernel silences this node for a VIP the moment its new owner's takeover
 * (gratuitous ARP, unsolicited NA) arrives, before any ServiceL2Status confirms it. This node's
 * own speaker may not see the label at all (its API server stale: the racing order of bench-seed,
 * answered twice 0.25 s until the confirmation). VIPs claimed already stay dropped. Undefined when
 * there is nothing to hold.
 */
function claimWatch(services: ServiceVips[], interfaces: string[], prior?: FenceSpec): FenceSpec | undefined {
  const spec = normalizeFence({
    vips4: prior?.vips4 ?? [],
    vips6: prior?.vips6 ?? [],
    interfaces,
    memberlistPorts: [],
    held: vipsOf(services),
  });
  return fenceIsEmpty(spec) ? undefined : spec;
}

/** The handover's claim watch (not a fail-safe's fence, which cuts memberlist or drops the pools). */
export const isClaimWatch = (fence: FenceSpec | undefined): fence is FenceSpec =>
  fence !== undefined && !cuts(fence) && !fence.pools && !fence.ownAddresses;

function labelled(memory: L2Memory, turn: Turn): L2Memory {
  // After a fail-safe its fence stays until the new attempt decides.
  if (memory.fence) ensureFence(turn, memory.fence);
  if (!turn.observation.excludeLabel) {
    if (turn.apiUp) turn.actions.push({ kind: 'label' });
    return memory;
  }
  return awaitingConfirmation(enter(memory, 'awaiting-confirmation', turn.now), turn);
}

function awaitingConfirmation(entered: L2Memory, turn: Turn): L2Memory {
  const { observation, settings, now } = turn;
  // A service moved to this node while labelled (rare) must be handed over as well.
  const services = mergeServices(entered.services, observation.announced);
  // The claim watch follows the services (announced here late, or known only now).
  const watched =
    entered.fence === undefined || isClaimWatch(entered.fence)
      ? claimWatch(services, turn.observation.interfaces, entered.fence)
      : entered.fence;
  const memory: L2Memory = { ...entered, services, fence: watched };
  if (memory.fence) ensureFence(turn, memory.fence);
  const cutOn = cuts(memory.fence);
  const started = memory.attemptStartedAt ?? memory.handoverStartedAt ?? now;
  // Re-checked after the label: another node cordoned at the same moment counted this one and
  // this one counted it; now neither could announce. Take the label back (never strand a VIP).
  const stuck = observation.otherCandidates === undefined ? undefined : nowhereToGo(services, observation);
  if (stuck !== undefined)
    return refuse(
      turn,
      `${stuck} any more (excluded, not Ready or no longer selected meanwhile): ${observation.labelOwned ? 'exclude label removed, ' : ''}${cutOn ? 'fail-safe fence and memberlist cut removed, ' : ''}not fencing (never strand a VIP)`,
    );
  // Nothing is concluded from a view not listed yet: "nothing announced here" may be "not read".
  if (observation.statusSource === 'unknown' || observation.metallbSynced === false) return memory;
  const confirmable = observation.statusSource === 'servicel2status';
  // Without usable ServiceL2Status (MetalLB < 0.14.4, say) nothing can confirm: wait the settle time
  // — unless no VIP is announced here: there is nothing for peers to take over.
  const handedTo = confirmable ? confirmations(services, observation) : {};
  const confirmed = confirmable
    ? services.every((s) => handedTo[s.service])
    : services.length === 0 || now - started >= settings.settleMs;
  // This node's speaker announces none of them any more while nobody confirmed: maybe dark now.
  const withdrawn =
    confirmable &&
    observation.synced &&
    services.length > 0 &&
    services.every((s) => !observation.announced.some((a) => a.service === s.service));
  if (!confirmed)
    return unconfirmed(
      { ...memory, handedTo, ownWithdrawnAt: withdrawn ? (memory.ownWithdrawnAt ?? now) : undefined },
      turn,
    );
  const took = secs(now - started);
  const reached = confirmable ? 'fenced-confirmed' : 'fenced-unconfirmed';
  // After a fail-safe the new owners re-elected because of the cut, not the label: keep the whole
  // fail-safe fence until the drain ends (FAILSAFE_KEPT).
  if (cutOn) {
    if (confirmable)
      event(
        turn,
        'Normal',
        L2_EVENT_REASONS.confirmed,
        `API back after the fail-safe: ${handedSummary(services, handedTo)}; ${FAILSAFE_KEPT}`,
      );
    else
      event(
        turn,
        'Normal',
        L2_EVENT_REASONS.unconfirmedFence,
        `MetalLB writes no ServiceL2Status (< 0.14.4): handover of ${vipsOf(services).join(', ')} unconfirmed; settle time passed ${took} after the API came back; ${FAILSAFE_KEPT}`,
      );
    // Confirmed (or settled): VIPs still held are another node's now.
    const fence = memory.fence ? dropOutright(memory.fence) : undefined;
    if (fence) ensureFence(turn, fence);
    return { ...enter(memory, reached, now), handedTo, fence };
  }
  const spec = fenceFor(services, observation.interfaces, []);
  ensureFence(turn, spec);
  const fenceText = fenceIsEmpty(spec)
    ? 'nothing to fence'
    : `fence installed on ${spec.interfaces.join(', ')}`;
  if (services.length === 0)
    event(turn, 'Normal', L2_EVENT_REASONS.done, `no VIPs announced here; exclude label set; ${fenceText}`);
  else if (confirmable)
    event(
      turn,
      'Normal',
      L2_EVENT_REASONS.done,
      `${handedSummary(services, handedTo)} in ${took}; ${fenceText}`,
    );
  else
    event(
      turn,
      'Normal',
      L2_EVENT_REASONS.unconfirmedFence,
      `MetalLB writes no ServiceL2Status (< 0.14.4): handover of ${vipsOf(services).join(', ')} unconfirmed; fenced after the settle time ${took}; ${fenceText}`,
    );
  return { ...enter(memory, reached, now), handedTo, fence: spec };
}

/** Awaiting confirmation, none yet: wait, or (budget spent) give up or warn. */
function unconfirmed(memory: L2Memory, turn: Turn): L2Memory {
  const { observation, settings, now } = turn;
  const started = memory.attemptStartedAt ?? memory.handoverStartedAt ?? now;
  const cutText = cuts(memory.fence) ? 'fail-safe fence and memberlist cut removed; ' : '';
  const budgetSpent =
    observation.statusSource === 'servicel2status' && now - started >= settings.handoverBudgetMs;
  if (!budgetSpent) return memory;
  const missing = memory.services
    .filter((s) => !memory.handedTo[s.service])
    .map((s) => `${s.service} (${s.ips.join(', ')})`);
  if (!observation.terminating) {
    // The exclude label alone silences this node's speaker: with nobody else announcing, the
    // VIP is dark. Take the label back (if it is ours) and let this node announce again.
    takeLabelBack(turn);
    dropFence(turn);
    event(
      turn,
      'Warning',
      L2_EVENT_REASONS.unconfirmed,
      `no other node took over ${missing.join(', ')} within ${secs(settings.handoverBudgetMs)}: not fencing (a dark VIP is worse than a moving one); ${cutText}${observation.labelOwned ? 'exclude label removed so this node announces again' : 'the exclude label was not added by drainguard: left in place'}; not retried until the drain ends`,
    );
    return { ...initialMemory(now), phase: 'given-up' };
  }
  if (memory.phase === 'overdue') return memory;
  // The claim watch stays: it drops nothing a new owner has not claimed.
  const watch = isClaimWatch(memory.fence) ? memory.fence : undefined;
  if (!watch) dropFence(turn);
  event(
    turn,
    'Warning',
    L2_EVENT_REASONS.unconfirmed,
    `no other node took over ${missing.join(', ')} within ${secs(settings.handoverBudgetMs)} while the pod terminates: not fencing (a dark VIP is worse than a moving one); ${cutText}still watching`,
  );
  return { ...enter(memory, 'overdue', now), fence: watch };
}

/** Keep the fence what this phase wants (someone else may have flushed it), and the label (label-guard.ts). */
function fenced(memory: L2Memory, turn: Turn): L2Memory {
  if (memory.fence) ensureFence(turn, memory.fence);
  const o = { ...turn.observation, apiUp: turn.apiUp };
  const label = fencedLabel(memory.labelLostAt, o, turn.settings.nodeName);
  if (label.relabel) turn.actions.push({ kind: 'label' });
  if (label.event) event(turn, label.event.type, label.event.reason, label.event.message);
  return label.lostAt === memory.labelLostAt ? memory : { ...memory, labelLostAt: label.lostAt };
}

/**
 * Fail-safe fenced. While the API is down: keep the fence. Once it answers (and the drain state is
 * known again) the fail-safe ends: the handover is decided again from scratch — eligibility per
 * service on fresh reads, the services announced now (not a Service deleted meanwhile, nor the
 * "(from fence)" guess of a restart without the Node annotation), a new budget and settle time
 * from the label. The fail-safe fence stays: removed if that decision refuses or gives up, kept
 * until the drain ends once it confirms (FAILSAFE_KEPT).
 */
function failsafeFenced(prior: L2Memory, turn: Turn): L2Memory {
  const { observation, now } = turn;
  const memory = cutIfStaying(prior, turn);
  if (memory.fence) ensureFence(turn, memory.fence);
  if (!turn.apiUp || (!observation.synced && !observation.terminating)) return memory;
  if (observation.otherCandidates === undefined || observation.statusSource === 'unknown') return memory;
  // What the fail-safe covered (the peers may have deleted this node's ServiceL2Status meanwhile)
  // and what is announced now; not a Service deleted meanwhile, nor a restart's guess from the fence.
  const gone = new Set(observation.goneServices ?? []);
  const covered = memory.services.filter((s) => s.service !== FROM_FENCE && !gone.has(s.service));
  const services = mergeServices(covered, observation.announced);
  const stuck = nowhereToGo(services, observation);
  if (stuck !== undefined)
    return refuse(
      turn,
      `API back after the fail-safe, ${turn.why}, but ${stuck}: fail-safe fence and memberlist cut removed so this node announces again; ${observation.labelOwned && observation.excludeLabel ? 'exclude label removed; ' : ''}not labelling (never strand a VIP)`,
    );
  if (!observation.excludeLabel) turn.actions.push({ kind: 'label' });
  event(
    turn,
    'Normal',
    L2_EVENT_REASONS.started,
    `API back after the fail-safe, ${turn.why}: handing over VIPs ${vipsOf(services).join(', ') || '(none announced here)'} to one of ${someOf(observation.otherCandidates)} again; the fail-safe fence stays until then`,
  );
  return {
    ...enter(memory, 'labelled', now),
    services,
    handedTo: {},
    attemptStartedAt: now,
    // Statuses written since the fail-safe began still confirm: the peers re-elected then.
    handoverStartedAt: memory.handoverStartedAt ?? now,
  };
}

/**
 * A fail-safe fence put on uncut for a pod going away that turned out to stay (a restart's hook
 * with the own Pod unreadable, the new container running): cut now, before peers whose API view
 * lacks the label re-elect the new speaker behind the fence.
 */
function cutIfStaying(memory: L2Memory, turn: Turn): L2Memory {
  const cut = failsafeCut(turn.observation, turn.settings);
  if (!memory.fence || cuts(memory.fence) || cut.length === 0) return memory;
  event(
    turn,
    'Warning',
    L2_EVENT_REASONS.failsafeFence,
    `the pod stays (${turn.why}) under the fail-safe fence: memberlist ports ${cut.join(', ')} cut now so peers re-elect without this node`,
  );
  return { ...memory, fence: normalizeFence({ ...memory.fence, memberlistPorts: cut }) };
}

/**
 * The fail-safe fence is to be installed now: draining or terminating, the API unreachable for the
 * grace period, not already fail-safe or confirmed-fenced, and not a known single speaker (cutting
 * it off would strand the VIP; unknown counts as "others exist"). The edge asks it too, to read the
 * node's own addresses only when they are needed.
 */
export function failsafeDue(
  memory: L2Memory,
  observation: Pick<L2Observation, 'now' | 'draining' | 'terminating' | 'apiDownSince' | 'otherCandidates'>,
  settings: Pick<L2Settings, 'failsafeGraceMs'>,
): boolean {
  return (
    (observation.draining || observation.terminating) &&
    observation.apiDownSince !== undefined &&
    observation.now - observation.apiDownSince >= settings.failsafeGraceMs &&
    !(observation.otherCandidates !== undefined && observation.otherCandidates.length === 0) &&
    memory.phase !== 'failsafe-fenced' &&
    memory.phase !== 'fenced-confirmed' &&
    // Fenced unconfirmed after a fail-safe: its fence (and cut) is still on.
    !(memory.phase === 'fenced-unconfirmed' && cuts(memory.fence)) &&
    // A refused or given-up handover keeps this node announcing: the fail-safe would overturn it.
    memory.phase !== 'refused' &&
    memory.phase !== 'given-up'
  );
}

/**
 * Why the fail-safe fence goes on though the API answers (undefined: it does not): awaiting
 * confirmation, unconfirmed the fail-safe's grace after the label (or the fail-safe's new
 * attempt; a confirmation takes ~1 s) — or OWN_WITHDRAWN_GRACE_MS after this node's own speaker
 * stopped announcing every VIP handed over (the VIP likely dark now) — and requests to the API
 * failed since the label. MetalLB's speakers read through the same
 * `kubernetes` Service; an API server whose etcd member is gone keeps their watches open and
 * silent, so peers may never see the label (docs/l2-handover.md, "A stale API server"). A peer
 * that cannot reach this node over memberlist re-elects without it whatever its API view: the
 * memberlist cut moves the VIP where the label could not. Not when nothing can confirm (no
 * ServiceL2Status: the settle-time fence is the plan) or no other node could announce.
 */
export function peersMayBeBlind(
  memory: L2Memory,
  observation: Pick<L2Observation, 'now' | 'apiFailedAt' | 'statusSource' | 'otherCandidates'>,
  settings: Pick<L2Settings, 'failsafeGraceMs'>,
): string | undefined {
  if (cuts(memory.fence)) return undefined;
  if (observation.statusSource !== 'servicel2status' || memory.services.length === 0) return undefined;
  // Not known now (their watches fail too, on the same stale server): the handover started because
  // some other node could announce; only a view that says none now holds the fail-safe back.
  if (observation.otherCandidates !== undefined && observation.otherCandidates.length === 0) return undefined;
  const started = awaitingSince(memory);
  const failed = observation.apiFailedAt;
  if (started === undefined || !failedSince(started, failed, settings)) return undefined;
  const withdrawnFor =
    memory.ownWithdrawnAt === undefined ? undefined : observation.now - memory.ownWithdrawnAt;
  const dark = withdrawnFor !== undefined && withdrawnFor >= OWN_WITHDRAWN_GRACE_MS;
  if (!dark && observation.now - started < settings.failsafeGraceMs) return undefined;
  const own = dark ? `; this node's speaker stopped announcing them ${secs(withdrawnFor)} ago` : '';
  return `no other node confirmed ${vipsOf(memory.services).join(', ')} ${secs(observation.now - started)} after the exclude label${own}, and API requests failed meanwhile (the last ${secs(observation.now - failed)} ago): the peers may read through a stale API server and never see the label`;
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

/**
 * Why the exclude label would strand a VIP: no other node could announce at all, or some service
 * announced here could go nowhere (its own eligibility). Undefined when every one can move.
 */
export function nowhereToGo(services: ServiceVips[], observation: L2Observation): string | undefined {
  const others = observation.otherCandidates ?? [];
  if (others.length === 0)
    return `no other node could announce VIPs ${vipsOf(services).join(', ') || '(none)'}`;
  const stuck = services.filter((s) => (observation.serviceCandidates?.[s.service] ?? others).length === 0);
  if (stuck.length === 0) return undefined;
  return `no other node could announce ${stuck.map((s) => `${s.service} (${s.ips.join(', ')})`).join(', ')} (MetalLB's eligibility per service: a Ready speaker, selected by an L2Advertisement of its pool, a ready endpoint for externalTrafficPolicy: Local)`;
}

function confirmations(services: ServiceVips[], observation: L2Observation): Record<string, string> {
  const out: Record<string, string> = {};
  for (const s of services) {
    const owner = observation.newOwners[s.service];
    if (owner && owner !== '') out[s.service] = owner;
  }
  return out;
}

function handedSummary(services: ServiceVips[], handedTo: Record<string, string>): string {
  const byNode = new Map<string, string[]>();
  for (const s of services) {
    const n = handedTo[s.service] ?? '?';
    byNode.set(n, [...(byNode.get(n) ?? []), ...s.ips]);
  }
  return [...byNode]
    .map(([n, ips]) => `VIP${ips.length === 1 ? '' : 's'} ${ips.join(', ')} handed to ${n}`)
    .join('; ');
}

/** Refused under way: label (if ours) and any fence off, L2HandoverImpossible. */
function refuse(turn: Turn, message: string): L2Memory {
  takeLabelBack(turn);
  dropFence(turn);
  event(turn, 'Warning', L2_EVENT_REASONS.impossible, message);
  return { ...initialMemory(turn.now), phase: 'refused' };
}

/** Removes whatever fence is installed (a fail-safe's, when its handover is refused or given up). */
function dropFence(turn: Turn): void {
  if (turn.observation.fence) turn.actions.push({ kind: 'unfence' });
}

/** Removes the exclude label if drainguard added it and it is there (and the API answers). */
function takeLabelBack(turn: Turn): void {
  const { observation } = turn;
  if (observation.labelOwned && observation.excludeLabel && turn.apiUp)
    turn.actions.push({ kind: 'unlabel' });
}

function ensureFence(turn: Turn, spec: FenceSpec): void {
  const installed = turn.observation.fence;
  if (fenceIsEmpty(spec)) {
    if (installed) turn.actions.push({ kind: 'unfence' });
  } else if (!installed || !sameFence(installed, spec)) {
    turn.actions.push({ kind: 'fence', spec });
  }
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

// --- resumption: what the Node annotation and the nft table say after a restart -----------

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
const keptAfterFailsafe = (memory: L2Memory) =>
  (memory.phase === 'fenced-confirmed' || memory.phase === 'fenced-unconfirmed') && cuts(memory.fence);

/** The services of a fence found without the Node annotation: their names are not known. */
export const FROM_FENCE = '(from fence)';
