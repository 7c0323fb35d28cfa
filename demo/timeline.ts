// The demo's recorded timeline: only what the demo measured itself (ARP answers seen by the
// client, Lease reads, API objects read back), in milliseconds from the start of the drain.
// Pure data and pure derivations; the report writer and the console summary read it.
import { formatTable } from '../shared/table.ts';

/** One probe round from the client namespace: which nodes answered ARP for the VIP. */
export interface ArpSample {
  t: number;
  nodes: string[];
}

/** One Lease read: who held it. Empty holder = released/none. */
export interface LeaseSample {
  t: number;
  holder: string;
  renewTime?: string;
}

/** Something read back from the API (annotation, label, Event, pod phase), with its time. */
export interface TimelineEvent {
  t: number;
  /** Where the demo saw it, e.g. "Node node-a annotation", "Event LeaseHandedOver". */
  source: string;
  text: string;
}

export interface Gap {
  name: string;
  /** Measured in this run; null when it did not happen within the demo's window. */
  measuredMs: number | null;
  /** What the same situation costs without drainguard (documented or measured baseline). */
  baselineMs: number | null;
  baselineNote: string;
  /** What the measured figure was taken from (probes, API reads, a log), for the report. */
  measuredFrom?: string;
}

/** A part of the system the demo ran: real, or a simulator standing in for it. */
export interface Component {
  name: string;
  real: boolean;
  note: string;
}

export interface Timeline {
  title: string;
  startedAt: string;
  endT: number;
  nodes: string[];
  vip: string;
  leaseName: string;
  /** Sampling intervals (ms), stated in the report as the measurement's resolution. */
  probeIntervalMs?: number;
  leaseIntervalMs?: number;
  apiIntervalMs?: number;
  /** Lease holder (pod) → the node it runs on, so the chart colours holders by node. */
  holderNodes?: Record<string, string>;
  /** What ran, real or simulated (the report's first table). */
  components?: Component[];
  arp: ArpSample[];
  lease: LeaseSample[];
  events: TimelineEvent[];
  /** Vertical markers: the moments the demo acted (cordon, evictions, pod deletes). */
  marks: { t: number; label: string }[];
  gaps: Gap[];
}

/** A run of equal values: [from, to) with the value (`''` = nobody). */
export interface Segment {
  from: number;
  to: number;
  value: string;
}

/** Collapses samples into runs; each sample holds until the next one (the last until endT). */
export function segments(samples: { t: number; value: string }[], endT: number): Segment[] {
  const sorted = [...samples].sort((a, b) => a.t - b.t);
  const out: Segment[] = [];
  for (const [i, s] of sorted.entries()) {
    const to = Math.max(s.t, sorted[i + 1]?.t ?? endT);
    const last = out[out.length - 1];
    if (last && last.value === s.value) last.to = to;
    else out.push({ from: s.t, to, value: s.value });
  }
  return out.filter((s) => s.to > s.from || out.length === 1);
}

export const arpValue = (s: ArpSample) => [...s.nodes].sort().join('+');

/**
 * The longest stretch after `from` in which nobody answered ARP for the VIP (ms), measured
 * between probe rounds: a round without answer starts a gap, the next answered round ends it.
 * 0 when every round after `from` was answered.
 */
export function longestArpSilence(arp: ArpSample[], from: number, endT: number): number {
  let longest = 0;
  for (const s of segments(
    arp.filter((a) => a.t >= from).map((a) => ({ t: a.t, value: arpValue(a) })),
    endT,
  ))
    if (s.value === '') longest = Math.max(longest, s.to - s.from);
  return longest;
}

/** First time after `from` that `node` (alone) answers, or null. */
export function firstAnsweredBy(arp: ArpSample[], node: string, from: number): number | null {
  const hit = arp.find((a) => a.t >= from && a.nodes.length === 1 && a.nodes[0] === node);
  return hit ? hit.t : null;
}

/** Last round after `from` in which `node` still answered, or null if it never did. */
export function lastAnsweredBy(arp: ArpSample[], node: string, from: number): number | null {
  let t: number | null = null;
  for (const a of arp) if (a.t >= from && a.nodes.includes(node)) t = a.t;
  return t;
}

/** The time the Lease holder first differs from `from`'s holder and is non-empty, or null. */
export function leaseMovedAt(lease: LeaseSample[], oldHolder: string, after: number): number | null {
  const hit = lease.find((l) => l.t >= after && l.holder !== '' && l.holder !== oldHolder);
  return hit ? hit.t : null;
}

/** Longest time after `from` with no holder other than `oldHolder` (old holder gone or empty). */
export function leaseVacancy(lease: LeaseSample[], oldHolder: string, vacatedAt: number): number | null {
  const moved = leaseMovedAt(lease, oldHolder, vacatedAt);
  return moved === null ? null : moved - vacatedAt;
}

/**
 * First read (at or after `after`) showing `holder` renewing the Lease itself: same holder, a
 * renewTime newer than the one written when it was named holder (by a handover or its own acquire
 * — for an acquire that first read already counts, pass `acquireCounts`).
 */
export function firstRenewBy(
  lease: LeaseSample[],
  holder: string,
  after: number,
  acquireCounts = false,
): number | null {
  const mine = lease.filter((l) => l.t >= after && l.holder === holder);
  const first = mine[0];
  if (!first) return null;
  if (acquireCounts) return first.t;
  const renewed = mine.find((l) => l.renewTime !== first.renewTime);
  return renewed ? renewed.t : null;
}

export const fmtMs = (ms: number | null) =>
  ms === null ? '—' : ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;

/** The console summary table: one row per gap, measured against the baseline. */
export function summaryTable(gaps: Gap[]): string {
  const rows = [['gap', 'drainguard (measured)', 'baseline', 'baseline from']];
  for (const g of gaps) rows.push([g.name, fmtMs(g.measuredMs), fmtMs(g.baselineMs), g.baselineNote]);
  return formatTable(rows);
}
