// The fail-safe and the API outage policy, pure: an outage remembered across phases (and how long
// the speakers need to catch up after it), when the fail-safe fence is due, when the peers may be
// blind, the fail-safe fence itself, and its memberlist cut when the pod stays after all.
import { normalizeFence } from '../fence.ts';
import { cuts, failsafeCut, fenceFor } from './fence-plan.ts';
import {
  ensureFence,
  enter,
  event,
  L2_EVENT_REASONS,
  type L2Memory,
  type L2Observation,
  type L2Settings,
  OWN_WITHDRAWN_GRACE_MS,
  SPEAKER_CATCH_UP_MAX_MS,
  secs,
  type Turn,
} from './model.ts';
import { confirmations, mergeServices, vipsOf } from './owners.ts';
import { awaitingSince, failedSince } from './schedule.ts';

export function outageAfter(
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
export function speakerCatchUpUntil(outage: L2Memory['apiOutage']): number {
  if (outage?.backAt === undefined) return Number.NEGATIVE_INFINITY;
  return outage.backAt + Math.min(2 * (outage.backAt - outage.since), SPEAKER_CATCH_UP_MAX_MS);
}

export function enterFailsafe(memory: L2Memory, turn: Turn, cause: string): L2Memory {
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

/**
 * A fail-safe fence put on uncut for a pod going away that turned out to stay (a restart's hook
 * with the own Pod unreadable, the new container running): cut now, before peers whose API view
 * lacks the label re-elect the new speaker behind the fence.
 */
export function cutIfStaying(memory: L2Memory, turn: Turn): L2Memory {
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
