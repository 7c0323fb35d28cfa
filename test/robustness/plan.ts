// The trial planner (pure): from (seed, trial) to what the trial does — one action on the lab
// cluster and one or more faults at random moments, each lasting a random time. The runner
// (run.ts) carries the plan out; it passes the fault kinds it implements, and the planner picks
// only among those, so a plan never names a fault nobody injects.
import { type Rng, trialRng } from './prng.ts';

/** What a trial does to the cluster, measured from its start (t = 0). */
export const ACTIONS = [
  /** `kubectl drain` of the node that answers for the VIP or holds the Lease. */
  'drain',
  /** `kubectl delete pod` of the speaker pod that answers for the VIP. */
  'delete-speaker-pod',
  /** `kubectl delete pod` of the Lease holder's pod. */
  'delete-leader-pod',
  /** `kubectl drain`, then `kubectl uncordon` while the handover runs. */
  'uncordon-mid-handover',
] as const;
export type Action = (typeof ACTIONS)[number];

export interface FaultSpec {
  /** What it does, for the report and docs/robustness.md. */
  what: string;
  /** Random duration range in ms ([0, 0]: instantaneous, or held until the trial settles). */
  durationMs: readonly [number, number];
  /** Only with these actions (default: every action). */
  actions?: readonly Action[];
  /** Needs the HA control plane (CONTROL_PLANES=3). */
  ha?: boolean;
  /** The runner injects it through the API (kubectl): it cannot strike while the API is down. */
  needsApi?: boolean;
  /** The runner's own API is down (or hangs) while it lasts. */
  apiOutage?: boolean;
  /** The runner injects it through the acting node's kubelet (`kubectl exec`). */
  needsKubelet?: boolean;
  /** The acting node's kubelet is down while it lasts. */
  kubeletOutage?: boolean;
}

/** Every fault kind issue 24 lists. */
export const FAULTS = {
  'sidecar-sigkill': {
    what: 'the drainguard container of the acting pod killed (SIGKILL through its pid), mid-handover',
    durationMs: [0, 0],
  },
  'pod-delete': {
    what: 'the acting pod deleted as a whole (kubectl delete pod)',
    durationMs: [0, 0],
    needsApi: true,
  },
  'speaker-restart': {
    what: 'the speaker container on the acting node killed (SIGKILL); the kubelet restarts it',
    durationMs: [0, 0],
  },
  'liveness-failure': {
    what: 'the guarded container fails its liveness probe',
    durationMs: [0, 0],
    needsApi: true,
    needsKubelet: true,
  },
  'api-server-restart': {
    what: 'kube-apiserver stopped, started again after the duration',
    durationMs: [1_000, 20_000],
    apiOutage: true,
  },
  'api-429': {
    what: "the API server answers 429 (API Priority and Fairness) to the sidecars' users",
    durationMs: [2_000, 20_000],
  },
  'api-path-drop': {
    what: "the acting node's path to the API server dropped (nft in the node's namespace), one or both directions",
    durationMs: [1_000, 30_000],
  },
  'etcd-pause': {
    what: 'etcd paused (SIGSTOP), resumed (SIGCONT) after the duration',
    durationMs: [500, 10_000],
    apiOutage: true,
  },
  'second-cordon': {
    what: 'a second node cordoned at the same time (uncordoned when the trial settles)',
    durationMs: [0, 0],
    needsApi: true,
  },
  'uncordon-recordon': {
    what: 'the drained node uncordoned mid-handover and cordoned again right after',
    durationMs: [0, 2_000],
    actions: ['drain'],
    needsApi: true,
  },
  'kubelet-restart': {
    what: 'the kubelet on the acting node restarted',
    durationMs: [0, 5_000],
    kubeletOutage: true,
  },
  'webhook-down': {
    what: 'both webhook replicas down while pods are re-created (failurePolicy)',
    durationMs: [5_000, 30_000],
    needsApi: true,
  },
  'stale-api-server': {
    what: "the acting node's local API server made stale (its etcd member removed; added back when the trial settles)",
    durationMs: [0, 0],
    ha: true,
    // When the removed member led etcd, no API server answers until the others elect a leader.
    apiOutage: true,
  },
} as const satisfies Record<string, FaultSpec>;
export type FaultKind = keyof typeof FAULTS;
/** A kind's spec, with every optional field (FAULTS' literal types leave out the absent ones). */
export const faultSpec = (kind: FaultKind): FaultSpec => FAULTS[kind];
export const FAULT_KINDS = Object.keys(FAULTS) as FaultKind[];

export interface PlannedFault {
  kind: FaultKind;
  /** From the trial's start (the action), ms. */
  atMs: number;
  durationMs: number;
  /** api-path-drop: which direction is dropped. */
  direction?: 'to-api' | 'from-api' | 'both';
}

export interface TrialPlan {
  seed: number;
  trial: number;
  action: Action;
  /** The node acted on: the one answering for the VIP, or the Lease holder's. */
  subject: 'vip-owner' | 'lease-holder';
  /** uncordon-mid-handover: when the uncordon comes (ms after the drain started). */
  uncordonAtMs?: number;
  faults: PlannedFault[];
  /**
   * Written by hand (scripted.ts), not drawn from (seed, trial): its name there, by which it is
   * run again (`make robustness SCRIPTED=<name>`).
   */
  scripted?: string;
}

export interface PlannerOptions {
  /** The kinds the runner implements (and may pick). */
  kinds: readonly FaultKind[];
  /** The actions the runner implements (default: all). */
  actions?: readonly Action[];
  /** Running on the HA control plane (CONTROL_PLANES=3). */
  ha?: boolean;
  /** At most this many faults per trial (default 2). */
  maxFaults?: number;
  /**
   * Faults start within this long after the action, ms (default 6000: while the handover runs);
   * one injected through the API may be moved past an API outage of the same trial.
   */
  windowMs?: number;
}

/** The faults a trial with `action` may be given. */
export function eligibleKinds(action: Action, opts: PlannerOptions): FaultKind[] {
  return opts.kinds.filter((k) => {
    const spec = faultSpec(k);
    if (spec.ha && !opts.ha) return false;
    return spec.actions === undefined || spec.actions.includes(action);
  });
}

/** How long after an outage's end the API is taken to answer again (a restarted server's start-up). */
export const API_RECOVERY_MS = 3_000;
/** How long a strike through the API takes (`kubectl exec` included): one planned this close before an outage may still be running into it. */
export const API_STRIKE_MS = 2_000;

/** How long after a kubelet restart its API (`exec`, port 10250) is taken to answer again. */
export const KUBELET_RECOVERY_MS = 3_000;

/** What a fault may need, and which faults take it away, for how long after they end. */
const NEEDS = [
  { needs: 'needsApi', outage: 'apiOutage', recoveryMs: API_RECOVERY_MS },
  { needs: 'needsKubelet', outage: 'kubeletOutage', recoveryMs: KUBELET_RECOVERY_MS },
] as const;

/**
 * A fault the runner injects through the API, planned inside another fault's API outage, would
 * fail to strike (SEED=13 TRIAL=43: a liveness failure's `kubectl exec` planned 47 ms before an
 * API server restart, still running when the server stopped); so would one injected through the
 * acting node's kubelet inside its restart (SEED=77 TRIAL=77: the liveness failure's `kubectl
 * exec` at 3.3 s, the kubelet down 2.0–6.3 s, "dial tcp …:10250: connection refused"). One planned
 * inside such an outage, or too close before it to finish, is moved to after it (and the
 * recovery); the runner also waits for the outage's lift before striking it.
 */
function outsideOutages(faults: PlannedFault[]): PlannedFault[] {
  // Moved past one kind of outage, a fault may land in the other kind's: again until none moves
  // (moves only go later, and every outage ends).
  let planned = faults;
  for (;;) {
    const next = outsideOutagesOnce(planned);
    if (next.every((f, i) => f === planned[i])) return next;
    planned = next;
  }
}

function outsideOutagesOnce(faults: PlannedFault[]): PlannedFault[] {
  return NEEDS.reduce((planned, { needs, outage, recoveryMs }) => {
    const outages = planned.filter((f) => faultSpec(f.kind)[outage]);
    // Outages in time order: a moved fault may land in a later one and move again.
    outages.sort((a, b) => a.atMs - b.atMs);
    return planned.map((f) => {
      if (!faultSpec(f.kind)[needs]) return f;
      let atMs = f.atMs;
      for (const o of outages) {
        const end = o.atMs + o.durationMs + recoveryMs;
        if (atMs >= o.atMs - API_STRIKE_MS && atMs < end) atMs = end;
      }
      return atMs === f.atMs ? f : { ...f, atMs };
    });
  }, faults);
}

function faultOf(kind: FaultKind, rng: Rng, windowMs: number): PlannedFault {
  const [lo, hi] = FAULTS[kind].durationMs;
  const f: PlannedFault = { kind, atMs: rng.int(0, windowMs), durationMs: rng.int(lo, hi) };
  if (kind === 'api-path-drop') f.direction = rng.pick(['to-api', 'from-api', 'both'] as const);
  return f;
}

/** Same seed and trial, same options → the same plan. */
export function planTrial(seed: number, trial: number, opts: PlannerOptions): TrialPlan {
  if (opts.kinds.length === 0) throw new Error('planTrial: no fault kinds to pick from');
  const rng = trialRng(seed, trial);
  const actions = (opts.actions ?? ACTIONS).filter((a) => eligibleKinds(a, opts).length > 0);
  if (actions.length === 0) throw new Error('planTrial: no action has a fault kind to pick');
  const action = rng.pick(actions);
  const kinds = eligibleKinds(action, opts);
  const count = Math.min(kinds.length, rng.int(1, Math.max(1, opts.maxFaults ?? 2)));
  const picked: FaultKind[] = [];
  while (picked.length < count) {
    const k = rng.pick(kinds);
    if (!picked.includes(k)) picked.push(k);
  }
  const windowMs = opts.windowMs ?? 6_000;
  const faults = outsideOutages(picked.map((k) => faultOf(k, rng, windowMs))).sort((a, b) => a.atMs - b.atMs);
  const subject =
    action === 'delete-speaker-pod'
      ? 'vip-owner'
      : action === 'delete-leader-pod'
        ? 'lease-holder'
        : rng.pick(['vip-owner', 'lease-holder'] as const);
  return {
    seed,
    trial,
    action,
    subject,
    ...(action === 'uncordon-mid-handover' ? { uncordonAtMs: rng.int(200, 3_000) } : {}),
    faults,
  };
}

/** One line for logs and the report: "drain(vip-owner) + etcd-pause@1.2s/3.4s + api-path-drop(both)@0.3s/12.0s". */
export function describePlan(p: TrialPlan): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)}s`;
  return [
    `${p.action}(${p.subject}${p.uncordonAtMs === undefined ? '' : `, uncordon@${s(p.uncordonAtMs)}`})`,
    ...p.faults.map(
      (f) =>
        `${f.kind}${f.direction ? `(${f.direction})` : ''}@${s(f.atMs)}${f.durationMs ? `/${s(f.durationMs)}` : ''}`,
    ),
  ].join(' + ');
}
