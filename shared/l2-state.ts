// The L2 sidecar's state as it publishes it in its Node's annotation (L2_STATE_ANNOTATION, JSON):
// written by the sidecar's core, read back by it on restart and by `drainguard status`.

export const L2_PHASES = [
  'idle',
  'labelled',
  'awaiting-confirmation',
  'fenced',
  'failsafe-fenced',
  'undoing',
] as const;
export type L2Phase = (typeof L2_PHASES)[number];

export interface ServiceVips {
  /** namespace/name */
  service: string;
  ips: string[];
}

export interface L2State {
  phase: L2Phase;
  since: string;
  handoverStartedAt?: string;
  vips: string[];
  services: ServiceVips[];
  handedTo: Record<string, string>;
  fenced: boolean;
  failsafe: boolean;
  interfaces: string[];
  /** Interfaces named for the fence (drainguard.io/l2-interfaces) that this node does not have. */
  missingInterfaces?: string[];
  /**
   * MetalLB's address pools (merged ranges "first-last") as last read: what a fail-safe fence
   * drops ARP/NA for. Absent: never read.
   */
  pools?: string[];
  /**
   * What the fail-safe fence installed (or still kept) drops: `pools` — ARP/NA in `pools` only;
   * `foreign` — every ARP/NA not from the node's own addresses (the pools were never read).
   */
  failsafeDrop?: 'pools' | 'foreign';
  /** The fail-safe's memberlist cut is on (during the fail-safe and, once it fired, until the drain ends). */
  memberlistCut?: boolean;
  /**
   * Under the fail-safe fence: the VIPs announced here that this node still answers until another
   * node claims them on the wire (then dropped here at once). Absent when none.
   */
  held?: string[];
  /**
   * Fenced after a fail-safe: why the fail-safe fence (`failsafeDrop`) and the memberlist cut stay
   * until the drain ends although the handover is confirmed. Absent otherwise.
   */
  failsafeKept?: string;
  stranded?: boolean;
  /** Given up unconfirmed while the drain lasts (label removed). */
  gaveUp?: boolean;
  observeOnly?: boolean;
  /** Why the L2 handover is off on this node (the speaker runs with --ignore-exclude-lb); absent while it runs. */
  disabled?: string;
}

export function parseL2State(text: string | undefined): L2State | undefined {
  if (!text) return undefined;
  try {
    const s = JSON.parse(text) as L2State;
    return L2_PHASES.includes(s.phase) ? s : undefined;
  } catch {
    return undefined;
  }
}
