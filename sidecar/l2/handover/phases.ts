// One function per phase of the L2 handover, pure, each called by step.ts's decide(): the drain's
// end, at rest, labelled, awaiting confirmation (and unconfirmed), fenced, fail-safe fenced; and
// the claims the kernel saw, absorbed before any of them.
import { claimedVips, fenceIsEmpty } from '../fence.ts';
import { fencedLabel } from '../label-guard.ts';
import { cutIfStaying, speakerCatchUpUntil } from './failsafe.ts';
import { claimWatch, cuts, dropOutright, fenceFor, isClaimWatch } from './fence-plan.ts';
import {
  atRestPhases,
  dropFence,
  ensureFence,
  enter,
  event,
  FAILSAFE_KEPT,
  FROM_FENCE,
  initialMemory,
  L2_EVENT_REASONS,
  type L2Memory,
  REJOIN_MS,
  RELABEL_MAX_MS,
  refuse,
  secs,
  someOf,
  type Turn,
  takeLabelBack,
} from './model.ts';
import { confirmations, handedSummary, mergeServices, nowhereToGo, vipsOf } from './owners.ts';

/**
 * Held VIPs (answered here until another node claims them: the fail-safe's, the claim watch's) that the kernel saw
 * claimed are dropped outright from now on: the fence this phase wants says so, and its re-render
 * (one nft transaction) loses nothing the kernel already drops.
 */
export function absorbClaims(memory: L2Memory, turn: Turn): L2Memory {
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

export function drainOver(memory: L2Memory, turn: Turn): L2Memory {
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
    // A memberlist cut lifted while a peer's watches may still be in their backoff after an API
    // outage: the peer, its view lacking the label, elects this node back as soon as it hears it,
    // and this node's speaker, seeing the label, stays silent: nobody answers (robustness SEED=66
    // TRIAL=0: dark 2.29 s, node-b relisting Nodes 8.9 s after the API came back). The whole
    // fence stays until the speakers have caught up, as the label does after a plain fence.
    if (cuts(observation.fence) && now < speakerCatchUpUntil(memory.apiOutage)) return undoing;
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

/** Idle, undoing, refused or given up while a handover is wanted: start one if every VIP can move. */
export function atRest(memory: L2Memory, turn: Turn): L2Memory {
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

export function labelled(memory: L2Memory, turn: Turn): L2Memory {
  // After a fail-safe its fence stays until the new attempt decides.
  if (memory.fence) ensureFence(turn, memory.fence);
  if (!turn.observation.excludeLabel) {
    if (turn.apiUp) turn.actions.push({ kind: 'label' });
    return memory;
  }
  return awaitingConfirmation(enter(memory, 'awaiting-confirmation', turn.now), turn);
}

export function awaitingConfirmation(entered: L2Memory, turn: Turn): L2Memory {
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
export function unconfirmed(memory: L2Memory, turn: Turn): L2Memory {
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
export function fenced(memory: L2Memory, turn: Turn): L2Memory {
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
export function failsafeFenced(prior: L2Memory, turn: Turn): L2Memory {
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
