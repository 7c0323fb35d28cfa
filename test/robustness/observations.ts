// What a trial records, from outside the product, as plain data: the runner (run.ts) fills it in,
// the checkers (checks.ts) and the report (report.ts) read it. Times are ms from the trial's start
// (the action), on this machine's clock. Node names stand for MACs (the runner maps them).
/** One ARP/NDP probe round for a VIP: which nodes answered. */
export interface ArpRound {
  t: number;
  nodes: string[];
}

/** From `t` on (until the next sample), these nodes could serve the VIP: schedulable, not excluded, speaker Ready. */
export interface EligibleSample {
  t: number;
  nodes: string[];
}

/** A node's fence as drainguard reported it (its Node's L2 state says fenced): from `t` until `liftedT`. */
export interface FenceReport {
  node: string;
  t: number;
  liftedT?: number;
}

/** The runner uncordoned `node` at `t`: from then on its fence is lifted on purpose. */
export interface RunnerUncordon {
  node: string;
  t: number;
}

/**
 * The fences as the checkers count them: each lifted when the poll saw its report go, or when the
 * runner uncordoned its node after it was reported (mid-trial or at the settle), whichever came
 * first. drainguard lifts the fence on the uncordon at once, and the handback that follows (the
 * returning node's speaker and the interim owner both answering until the latter sees the label
 * go) is MetalLB's owner change, not a fence failing; the report of the lift comes a poll later.
 */
export function fencesAsCounted(polled: FenceReport[], uncordons: RunnerUncordon[]): FenceReport[] {
  return polled.map((f) => {
    const lifted = [
      ...(f.liftedT === undefined ? [] : [f.liftedT]),
      ...uncordons.filter((u) => u.node === f.node && u.t >= f.t).map((u) => u.t),
    ];
    return { node: f.node, t: f.t, ...(lifted.length ? { liftedT: Math.min(...lifted) } : {}) };
  });
}

/** A Lease holder read from the API. `''`: none. */
export interface HolderSample {
  t: number;
  holder: string;
}

/** A candidate's own account (the simulator's log) of leader work starting or stopping; `exited`: its container ended. */
export interface LeaderEvent {
  t: number;
  identity: string;
  ev: 'leading' | 'stopped-leading' | 'exited';
}

/** A pod's netfilter rules (ebtables/nft handles) before the action and after the settle. */
export interface PodRules {
  pod: string;
  /** The pod was live (running, not deleted) throughout. */
  live: boolean;
  before: string[];
  after: string[];
}

/** A container seen before the action and after the settle. */
export interface ContainerRecord {
  pod: string;
  container: string;
  /** The drainguard sidecar. */
  sidecar: boolean;
  restartsBefore: number;
  restartsAfter: number;
  /** Its last termination, as the kubelet reported it. */
  lastExit?: { reason: string; exitCode: number };
}

/** A node's path to the API cut by the runner (api-path-drop), from `from` until `to`. */
export interface ApiCut {
  node: string;
  from: number;
  to: number;
}

/** The runner stopped the speaker container on `node` at `t` (speaker-restart, liveness-failure). */
export interface SpeakerStop {
  node: string;
  t: number;
}

export interface LogLine {
  source: string;
  line: string;
}

export interface TrialObservations {
  /** The start (the action's moment) as epoch ms: every other time is from it. */
  startedAt?: number;
  /** The last time observed (ms from the start). */
  endT: number;
  /** When the trial settled (uncordoned, faults lifted); checks of "after the settle" start here. */
  settledT: number;
  /** Per VIP, every probe round from before the action to the end. */
  arp: Record<string, ArpRound[]>;
  eligible: EligibleSample[];
  fences: FenceReport[];
  holders: HolderSample[];
  leaderEvents: LeaderEvent[];
  /** client-go's RenewDeadline of the candidates (ms). */
  renewDeadlineMs: number;
  netfilter: PodRules[];
  /** What was left on each node after the settle (lab/cluster/leftovers.ts: leftoversOf). */
  leftovers: { node: string; what: string[] }[];
  /** Per VIP, the probe rounds after the settle. */
  settledArp: Record<string, ArpRound[]>;
  containers: ContainerRecord[];
  /** Containers the nemesis itself killed or failed ("pod/container"): their restarts are expected. */
  injectedRestarts: string[];
  logs: LogLine[];
  /** Secrets that must never be logged (the pods' service account tokens). */
  tokens: string[];
  /** Moments the runner acted (action, each fault on and off), for the timeline. */
  marks: { t: number; label: string }[];
  /** Paths to the API the runner cut, and speakers it stopped: together they blind a VIP owner (checks.ts). */
  apiCuts?: ApiCut[];
  speakerStops?: SpeakerStop[];
}
