// The L2 sidecar's state as it publishes it in its Node's annotation (L2_STATE_ANNOTATION, JSON):
// written by the sidecar's core, read back by it on restart and by `drainguard status`.
import { isIP } from 'node:net';

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

/** Where (a path below the value, '' for the value itself) and why a value lacks a shape. */
type Flaw = { at: string; why: string };
/** The flaw of a value, or undefined when it has the shape. */
type Check = (v: unknown) => Flaw | undefined;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const flaw = (ok: boolean, why: string): Flaw | undefined => (ok ? undefined : { at: '', why });
const below = (at: string, f: Flaw | undefined): Flaw | undefined => f && { at: `${at}${f.at}`, why: f.why };
const str: Check = (v) => flaw(typeof v === 'string', 'not a string');
const bool: Check = (v) => flaw(typeof v === 'boolean', 'not true or false');
const oneOf =
  (values: readonly string[]): Check =>
  (v) =>
    flaw(typeof v === 'string' && values.includes(v), `not one of ${values.join(', ')}`);
const ip: Check = (v) => flaw(typeof v === 'string' && isIP(v) !== 0, 'not an IP address');
/** MetalLB's pools as core.ts remembers them: "first-last", both addresses of one family. */
const range: Check = (v) => {
  const [a = '', b = '', extra] = typeof v === 'string' ? v.split('-') : [];
  return flaw(
    extra === undefined && isIP(a) !== 0 && isIP(a) === isIP(b),
    'not an address range "first-last"',
  );
};
const each =
  (item: Check): Check =>
  (v) => {
    if (!Array.isArray(v)) return flaw(false, 'not an array');
    for (const [i, x] of v.entries()) {
      const f = below(`[${i}]`, item(x));
      if (f) return f;
    }
    return undefined;
  };
const stringValues: Check = (v) => {
  if (!isObject(v)) return flaw(false, 'not an object');
  const bad = Object.keys(v).find((k) => typeof v[k] !== 'string');
  return bad === undefined ? undefined : { at: `.${bad}`, why: 'not a string' };
};
const fields =
  (shape: Record<string, { check: Check; optional?: true }>): Check =>
  (v) => {
    if (!isObject(v)) return flaw(false, 'not an object');
    for (const [name, { check, optional }] of Object.entries(shape)) {
      if (v[name] === undefined) {
        if (optional) continue;
        return { at: `.${name}`, why: 'missing' };
      }
      const f = below(`.${name}`, check(v[name]));
      if (f) return f;
    }
    return undefined;
  };
const required = (check: Check) => ({ check });
const optional = (check: Check) => ({ check, optional: true as const });

/** Every field of L2State, as the sidecar writes it (core.ts statusOf). */
const L2_STATE_SHAPE = fields({
  phase: required(oneOf(L2_PHASES)),
  since: required(str),
  handoverStartedAt: optional(str),
  vips: required(each(ip)),
  services: required(each(fields({ service: required(str), ips: required(each(ip)) }))),
  handedTo: required(stringValues),
  fenced: required(bool),
  failsafe: required(bool),
  interfaces: required(each(str)),
  missingInterfaces: optional(each(str)),
  pools: optional(each(range)),
  failsafeDrop: optional(oneOf(['pools', 'foreign'])),
  memberlistCut: optional(bool),
  held: optional(each(ip)),
  failsafeKept: optional(str),
  stranded: optional(bool),
  gaveUp: optional(bool),
  observeOnly: optional(bool),
  disabled: optional(str),
});

/**
 * The annotation read: its state when it is whole and well-formed, or what is wrong with it. A
 * user, a tool or a version of drainguard may have written anything there: the sidecar resumes
 * from it, and one malformed field (a service without `ips`) made every reconcile throw.
 */
export function readL2State(text: string | undefined): { state?: L2State; problem?: string } {
  if (!text) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    return { problem: `not JSON (${(e as Error).message})` };
  }
  const f = L2_STATE_SHAPE(parsed);
  return f
    ? { problem: `${f.at.replace(/^\./, '') || 'the annotation'}: ${f.why}` }
    : { state: parsed as L2State };
}

/** The annotation's state, or undefined when absent or malformed (readL2State says why). */
export function parseL2State(text: string | undefined): L2State | undefined {
  return readL2State(text).state;
}
