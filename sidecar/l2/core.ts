// The L2 handover decision core, pure: plain observations and an injected `now` in, the next
// phase and the actions to take out. The I/O edge (capability.ts) gathers observations,
// executes actions and calls step() again; every action is idempotent, so a repeated step
// after a crash or a failed action is harmless.
import type { L2Phase, L2Status, ServiceVips } from '../../shared/l2-state.ts';
import { type FenceSpec, fenceIsEmpty, normalizeFence } from './fence.ts';

export interface L2Settings {
  handoverBudgetMs: number;
  /** Without the ServiceL2Status CRD (MetalLB < 0.14.4): wait this long instead of confirming. */
  settleMs: number;
  failsafeGraceMs: number;
  memberlistPorts: number[];
  nodeName: string;
}

export interface L2Observation {
  now: number;
  draining: boolean;
  terminating: boolean;
  drainReason: string | undefined;
  /** The own Node and Pod have been read at least once. */
  synced: boolean;
  apiDownSince: number | undefined;
  excludeLabel: boolean;
  labelOwned: boolean;
  /** The ServiceL2Status CRD exists; undefined until known. */
  crd: boolean | undefined;
  /** What this node announces now (own ServiceL2Status objects; all LB services without the CRD). */
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
  /** Interfaces to fence. */
  interfaces: string[];
  /**
   * The node's own addresses (`ip addr`), read while the fail-safe is due or on; undefined when
   * not read. The fail-safe fence drops every ARP/NA not from them.
   */
  ownAddresses?: string[] | undefined;
  /** The fence installed now (read back from nft), or undefined. */
  fence: FenceSpec | undefined;
}

export interface L2Memory {
  phase: L2Phase;
  /** When the current phase was entered (epoch ms). */
  since: number;
  handoverStartedAt: number | undefined;
  /** Services being handed over (snapshot from the start, grown by any announced later). */
  services: ServiceVips[];
  handedTo: Record<string, string>;
  /** The fence this phase wants installed. */
  fence: FenceSpec | undefined;
  confirmed: boolean;
  warnedUnconfirmed: boolean;
  /** Handover refused because no other node could announce (never strand a VIP). */
  stranded: boolean;
  /**
   * Handover given up: nobody confirmed within the budget while the node drains (the pod is not
   * going away), so the label was removed and this node announces again. Not retried until the
   * drain ends.
   */
  gaveUp: boolean;
}

export type L2Action =
  | { kind: 'label' }
  | { kind: 'unlabel' }
  | { kind: 'fence'; spec: FenceSpec }
  | { kind: 'unfence' }
  | { kind: 'event'; type: 'Normal' | 'Warning'; reason: string; message: string };

export const initialMemory = (now: number): L2Memory => ({
  phase: 'idle',
  since: now,
  handoverStartedAt: undefined,
  services: [],
  handedTo: {},
  fence: undefined,
  confirmed: false,
  warnedUnconfirmed: false,
  stranded: false,
  gaveUp: false,
});

const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
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
): FenceSpec {
  const vips = vipsOf(services);
  return normalizeFence({
    vips4: vips.filter((v) => !v.includes(':')),
    vips6: vips.filter((v) => v.includes(':')),
    interfaces,
    memberlistPorts,
    ...(ownAddresses ? { ownAddresses } : {}),
  });
}

const enter = (mem: L2Memory, phase: L2Phase, now: number): L2Memory =>
  mem.phase === phase ? mem : { ...mem, phase, since: now };

/** One decision: where to go from here, and what to do to get there. */
export function step(
  mem0: L2Memory,
  obs: L2Observation,
  cfg: L2Settings,
): { mem: L2Memory; actions: L2Action[] } {
  const actions: L2Action[] = [];
  const now = obs.now;
  let mem = mem0;
  const want = obs.draining || obs.terminating;
  const apiUp = obs.apiDownSince === undefined;
  const why = obs.terminating ? 'pod terminating' : (obs.drainReason ?? 'draining');
  const event = (type: 'Normal' | 'Warning', reason: string, message: string) =>
    actions.push({ kind: 'event', type, reason, message });
  const ensureFence = (spec: FenceSpec) => ensureFenceInto(actions, obs, spec);

  // --- drain over (uncordoned, not terminating): fence off first, then the label ----------
  if (!want) {
    const leftovers = obs.fence !== undefined || (obs.labelOwned && obs.excludeLabel);
    if (mem.phase === 'idle' && !leftovers) {
      if (mem.stranded || mem.gaveUp) mem = { ...mem, stranded: false, gaveUp: false };
      return { mem, actions };
    }
    // "Not draining" is only known from a synced view of an existing Node: a restart during an
    // API outage (or a Node that is gone) must not undo a fence or label, and the fail-safe stays
    // until the API is back.
    if (!obs.synced) return { mem, actions };
    if (mem.phase === 'failsafe-fenced' && !apiUp) return { mem, actions };
    mem = enter(mem, 'undoing', now);
    if (obs.fence) {
      actions.push({ kind: 'unfence' });
      return { mem, actions };
    }
    if (obs.labelOwned && obs.excludeLabel) {
      if (apiUp) actions.push({ kind: 'unlabel' });
      return { mem, actions };
    }
    event(
      'Normal',
      'L2HandoverUndone',
      'drain over: fence removed, exclude label removed if drainguard had added it',
    );
    return { mem: initialMemory(now), actions };
  }

  // --- draining or terminating -----------------------------------------------------------
  if (failsafeDue(mem, obs, cfg)) {
    const services = mergeServices(mem.services, obs.announced);
    // Cut off from memberlist, the speaker hears no peer and announces every VIP its pools allow:
    // drop every ARP/NA not from the node's own addresses, not only the VIPs it had.
    const spec = fenceFor(services, obs.interfaces, cfg.memberlistPorts, obs.ownAddresses);
    mem = {
      ...enter(mem, 'failsafe-fenced', now),
      services,
      fence: spec,
      handoverStartedAt: mem.handoverStartedAt ?? now,
    };
    ensureFence(spec);
    const vips = vipsOf(services).join(', ') || '(none known)';
    const fenced = spec.ownAddresses
      ? `every ARP/NA not from this node's own addresses (VIPs announced here: ${vips})`
      : `VIPs ${vips}`;
    event(
      'Warning',
      'L2FailsafeFence',
      `API unreachable for ${secs(now - (obs.apiDownSince ?? now))} while ${why}: fenced ${fenced} on ${obs.interfaces.join(', ') || '(no interface)'} and cut memberlist ports ${cfg.memberlistPorts.join(', ')} so peers re-elect without this node`,
    );
    return { mem, actions };
  }

  switch (mem.phase) {
    case 'undoing':
    case 'idle': {
      if (mem.gaveUp && !obs.terminating) {
        // Given up while the drain lasts: keep the label off (the removal may have failed).
        takeLabelBack(actions, obs);
        return { mem, actions };
      }
      if (!obs.synced && !obs.terminating) return { mem, actions };
      if (obs.otherCandidates === undefined) return { mem, actions };
      const stuck = nowhereToGo(obs.announced, obs);
      if (stuck !== undefined) {
        if (!mem.stranded) {
          event(
            'Warning',
            'L2HandoverImpossible',
            `${why}, but ${stuck}: not labelling, not fencing (never strand a VIP)`,
          );
          mem = { ...mem, stranded: true };
        }
        return { mem, actions };
      }
      mem = {
        ...enter(mem, 'labelled', now),
        stranded: false,
        gaveUp: false,
        handoverStartedAt: now,
        services: mergeServices([], obs.announced),
        handedTo: {},
        fence: undefined,
        confirmed: false,
        warnedUnconfirmed: false,
      };
      if (!obs.excludeLabel) actions.push({ kind: 'label' });
      event(
        'Normal',
        'L2HandoverStarted',
        `${why}: handing over VIPs ${vipsOf(mem.services).join(', ') || '(none announced here)'} to one of ${obs.otherCandidates.join(', ')}`,
      );
      return { mem, actions };
    }
    case 'labelled': {
      if (!obs.excludeLabel) {
        if (apiUp) actions.push({ kind: 'label' });
        return { mem, actions };
      }
      mem = enter(mem, 'awaiting-confirmation', now);
      return awaiting(mem, obs, cfg, actions, event);
    }
    case 'awaiting-confirmation':
      return awaiting(mem, obs, cfg, actions, event);
    case 'fenced':
    case 'failsafe-fenced': {
      // Keep the fence what this phase wants (it may have been flushed by someone else).
      if (mem.fence) ensureFence(mem.fence);
      if (mem.phase === 'failsafe-fenced' && apiUp) {
        // API back, still draining: finish the handover the normal way; the fence stays on
        // (without the memberlist cut once another node is confirmed).
        if (!obs.excludeLabel) actions.push({ kind: 'label' });
        const services = mergeServices(mem.services, obs.announced);
        const handedTo = confirmations(services, obs);
        if (obs.excludeLabel && services.every((s) => handedTo[s.service])) {
          const spec = fenceFor(services, obs.interfaces, []);
          mem = { ...enter(mem, 'fenced', now), services, handedTo, fence: spec, confirmed: true };
          ensureFence(spec);
          event(
            'Normal',
            'L2HandoverConfirmed',
            `API back: ${handedSummary(services, handedTo)}; memberlist cut lifted, fence kept`,
          );
        }
      }
      return { mem, actions };
    }
  }
}

/**
 * The fail-safe fence is to be installed now: draining or terminating, the API unreachable for the
 * grace period, not already fail-safe or confirmed-fenced, and not a known single speaker (cutting
 * it off would strand the VIP; unknown counts as "others exist"). The edge asks it too, to read the
 * node's own addresses only when they are needed.
 */
export function failsafeDue(
  mem: L2Memory,
  obs: Pick<L2Observation, 'now' | 'draining' | 'terminating' | 'apiDownSince' | 'otherCandidates'>,
  cfg: Pick<L2Settings, 'failsafeGraceMs'>,
): boolean {
  return (
    (obs.draining || obs.terminating) &&
    obs.apiDownSince !== undefined &&
    obs.now - obs.apiDownSince >= cfg.failsafeGraceMs &&
    !(obs.otherCandidates !== undefined && obs.otherCandidates.length === 0) &&
    mem.phase !== 'failsafe-fenced' &&
    !(mem.phase === 'fenced' && mem.confirmed)
  );
}

/**
 * Why the exclude label would strand a VIP: no other node could announce at all, or some service
 * announced here could go nowhere (its own eligibility). Undefined when every one can move.
 */
export function nowhereToGo(services: ServiceVips[], obs: L2Observation): string | undefined {
  const others = obs.otherCandidates ?? [];
  if (others.length === 0)
    return `no other node could announce VIPs ${vipsOf(services).join(', ') || '(none)'}`;
  const stuck = services.filter((s) => (obs.serviceCandidates?.[s.service] ?? others).length === 0);
  if (stuck.length === 0) return undefined;
  return `no other node could announce ${stuck.map((s) => `${s.service} (${s.ips.join(', ')})`).join(', ')} (MetalLB's eligibility per service: a Ready speaker, selected by an L2Advertisement of its pool, a ready endpoint for externalTrafficPolicy: Local)`;
}

function confirmations(services: ServiceVips[], obs: L2Observation): Record<string, string> {
  const out: Record<string, string> = {};
  for (const s of services) {
    const owner = obs.newOwners[s.service];
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

function awaiting(
  mem0: L2Memory,
  obs: L2Observation,
  cfg: L2Settings,
  actions: L2Action[],
  event: (type: 'Normal' | 'Warning', reason: string, message: string) => void,
): { mem: L2Memory; actions: L2Action[] } {
  const now = obs.now;
  // A service moved to this node while labelled (rare) must be handed over as well.
  const services = mergeServices(mem0.services, obs.announced);
  let mem: L2Memory = { ...mem0, services };
  const started = mem.handoverStartedAt ?? now;
  const took = secs(now - started);
  // Re-checked after the label: another node cordoned at the same moment counted this one and
  // this one counted it; now neither could announce. Take the label back (never strand a VIP).
  const stuck = obs.otherCandidates === undefined ? undefined : nowhereToGo(services, obs);
  if (stuck !== undefined) {
    takeLabelBack(actions, obs);
    event(
      'Warning',
      'L2HandoverImpossible',
      `${stuck} any more (excluded, not Ready or no longer selected meanwhile): ${obs.labelOwned ? 'exclude label removed, ' : ''}not fencing (never strand a VIP)`,
    );
    return { mem: { ...initialMemory(now), stranded: true }, actions };
  }
  if (obs.crd === undefined) return { mem, actions };
  let confirmed: boolean;
  let handedTo: Record<string, string> = {};
  if (obs.crd) {
    handedTo = confirmations(services, obs);
    confirmed = services.every((s) => handedTo[s.service]);
  } else {
    // MetalLB < 0.14.4 writes no ServiceL2Status: nothing can confirm; wait the settle time.
    confirmed = now - started >= cfg.settleMs;
  }
  mem = { ...mem, handedTo };
  if (!confirmed) {
    const missing = services
      .filter((s) => !handedTo[s.service])
      .map((s) => `${s.service} (${s.ips.join(', ')})`);
    const budgetSpent = obs.crd && now - started >= cfg.handoverBudgetMs;
    if (budgetSpent && !obs.terminating) {
      // The exclude label alone silences this node's speaker: with nobody else announcing, the
      // VIP is dark. Take the label back (if it is ours) and let this node announce again.
      takeLabelBack(actions, obs);
      event(
        'Warning',
        'L2HandoverUnconfirmed',
        `no other node took over ${missing.join(', ')} within ${secs(cfg.handoverBudgetMs)}: not fencing (a dark VIP is worse than a moving one); ${obs.labelOwned ? 'exclude label removed so this node announces again' : 'the exclude label was not added by drainguard: left in place'}; not retried until the drain ends`,
      );
      return { mem: { ...initialMemory(now), gaveUp: true }, actions };
    }
    if (budgetSpent && !mem.warnedUnconfirmed) {
      event(
        'Warning',
        'L2HandoverUnconfirmed',
        `no other node took over ${missing.join(', ')} within ${secs(cfg.handoverBudgetMs)} while the pod terminates: not fencing (a dark VIP is worse than a moving one); still watching`,
      );
      mem = { ...mem, warnedUnconfirmed: true };
    }
    return { mem, actions };
  }
  const spec = fenceFor(services, obs.interfaces, []);
  mem = { ...enter(mem, 'fenced', now), fence: spec, confirmed: obs.crd };
  ensureFenceInto(actions, obs, spec);
  const fenceText = fenceIsEmpty(spec)
    ? 'nothing to fence'
    : `fence installed on ${spec.interfaces.join(', ')}`;
  if (services.length === 0)
    event('Normal', 'L2HandoverDone', `no VIPs announced here; exclude label set; ${fenceText}`);
  else if (obs.crd)
    event('Normal', 'L2HandoverDone', `${handedSummary(services, handedTo)} in ${took}; ${fenceText}`);
  else
    event(
      'Normal',
      'L2HandoverUnconfirmedFence',
      `MetalLB writes no ServiceL2Status (< 0.14.4): handover of ${vipsOf(services).join(', ')} unconfirmed; fenced after the settle time ${took}; ${fenceText}`,
    );
  return { mem, actions };
}

/** Removes the exclude label if drainguard added it and it is there (and the API answers). */
function takeLabelBack(actions: L2Action[], obs: L2Observation): void {
  if (obs.labelOwned && obs.excludeLabel && obs.apiDownSince === undefined) actions.push({ kind: 'unlabel' });
}

function ensureFenceInto(actions: L2Action[], obs: L2Observation, spec: FenceSpec): void {
  if (fenceIsEmpty(spec)) {
    if (obs.fence) actions.push({ kind: 'unfence' });
  } else if (!obs.fence || JSON.stringify(obs.fence) !== JSON.stringify(spec)) {
    actions.push({ kind: 'fence', spec });
  }
}

/** Phases in which step() depends on time passing (the edge ticks while in them). */
export function needsTick(
  mem: L2Memory,
  obs: Pick<L2Observation, 'draining' | 'terminating' | 'apiDownSince'>,
): boolean {
  const want = obs.draining || obs.terminating;
  if (want && obs.apiDownSince !== undefined && mem.phase !== 'failsafe-fenced') return true;
  return mem.phase === 'labelled' || mem.phase === 'awaiting-confirmation';
}

/** The handover is as far as it goes (for /prestop): fenced, refused, or given up. */
export function settled(mem: L2Memory): boolean {
  // Not gaveUp: /prestop waits only once the pod is going away, and then a new attempt starts.
  return mem.phase === 'fenced' || mem.phase === 'failsafe-fenced' || mem.stranded;
}

// --- resumption: what the Node annotation and the nft table say after a restart -----------

export function statusOf(mem: L2Memory, observeOnly: boolean): L2Status {
  return {
    phase: mem.phase,
    since: new Date(mem.since).toISOString(),
    ...(mem.handoverStartedAt !== undefined
      ? { handoverStartedAt: new Date(mem.handoverStartedAt).toISOString() }
      : {}),
    vips: vipsOf(mem.services),
    services: mem.services,
    handedTo: mem.handedTo,
    fenced:
      mem.fence !== undefined &&
      !fenceIsEmpty(mem.fence) &&
      (mem.phase === 'fenced' || mem.phase === 'failsafe-fenced'),
    failsafe: mem.phase === 'failsafe-fenced',
    interfaces: mem.fence?.interfaces ?? [],
    ...(mem.stranded ? { stranded: true } : {}),
    ...(mem.gaveUp ? { gaveUp: true } : {}),
    ...(observeOnly ? { observeOnly: true } : {}),
  };
}

/** Memory rebuilt on start from the Node annotation and the installed fence. */
export function resume(status: L2Status | undefined, fence: FenceSpec | undefined, now: number): L2Memory {
  const mem = initialMemory(now);
  const t = (iso: string | undefined) => {
    const n = iso ? Date.parse(iso) : Number.NaN;
    return Number.isNaN(n) ? undefined : n;
  };
  const services = status?.services ?? [];
  const fromFence = (f: FenceSpec): ServiceVips[] =>
    services.length > 0 ? services : [{ service: '(from fence)', ips: [...f.vips4, ...f.vips6] }];
  if (fence) {
    const failsafe = fence.memberlistPorts.length > 0;
    return {
      ...mem,
      phase: failsafe ? 'failsafe-fenced' : 'fenced',
      since: t(status?.since) ?? now,
      handoverStartedAt: t(status?.handoverStartedAt) ?? now,
      services: fromFence(fence),
      handedTo: status?.handedTo ?? {},
      fence,
      confirmed: !failsafe && status?.phase === 'fenced',
    };
  }
  if (status && (status.phase === 'labelled' || status.phase === 'awaiting-confirmation')) {
    return {
      ...mem,
      phase: 'labelled',
      since: t(status.since) ?? now,
      handoverStartedAt: t(status.handoverStartedAt) ?? now,
      services,
    };
  }
  // Given up before a restart: not retried until the drain ends (the !want branch resets it).
  if (status?.phase === 'idle' && status.gaveUp) return { ...mem, gaveUp: true };
  return mem;
}
