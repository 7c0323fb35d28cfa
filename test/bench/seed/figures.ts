// make bench-seed's figures from what the client namespace saw (pure: unit-tested in
// test/unit/bench/seed-figures.test.ts): ARP rounds for the API VIP and the API reads through it,
// over a window from the drain to the end of the run.
import type { ProbeRound } from '../../../lab/bed/arp-probe.ts';

/** One read of the drained Node through the VIP (api-probe.ts). */
export interface ApiRead {
  /** Sent at (ms). */
  t: number;
  ms: number;
  /** HTTP status; 0 without an answer (refused, reset, timed out). */
  code: number;
  unschedulable?: boolean;
}

export interface SeedFigures {
  /** Rounds with no ARP answer, in seconds (summed). */
  dark_s: number;
  /** Rounds answered by two or more MACs, in seconds (summed). */
  dual_s: number;
  /** The longest stretch without a 200 through the VIP (by answer time), in seconds. */
  api_unavailable_s: number;
  /**
   * The same, asked of a control-plane node that stays (its API server by its own address, not
   * through the VIP): what no route to the API could have done better (an etcd leader election
   * after the removed member led, say); null when not measured.
   */
  cluster_api_unavailable_s: number | null;
  /** From the drain to the drained node's last ARP answer; null if it never answered after it. */
  silenced_s: number | null;
  /** From the drain to the first 200 through the VIP showing the Node unschedulable; null: never. */
  drain_seen_s: number | null;
  /** From the etcd member's removal to the first 200 through the VIP sent after it; null: never. */
  api_back_s: number | null;
  /** Who answered, as [seconds from the drain, MACs] at every change. */
  owners: [number, string[]][];
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

export function seedFigures(opts: {
  rounds: ProbeRound[];
  reads: ApiRead[];
  intervalMs: number;
  /** The drain's start (ms). */
  from: number;
  /** The end of the window (ms). */
  to: number;
  /** The drained node's MAC (lower case). */
  drainedMac: string;
  /** When its etcd member was removed (ms). */
  removedAt?: number;
  /** The same reads of a control-plane node that stays, directly (cluster_api_unavailable_s). */
  directReads?: ApiRead[];
}): SeedFigures {
  const { from, to, intervalMs } = opts;
  const win = opts.rounds.filter((r) => r.t >= from && r.t <= to);
  const sec = (n: number) => round3((n * intervalMs) / 1000);
  const lastDrained = win.filter((r) => r.macs.map((m) => m.toLowerCase()).includes(opts.drainedMac)).pop();
  const owners: [number, string[]][] = [];
  for (const r of win) {
    const macs = [...new Set(r.macs.map((m) => m.toLowerCase()))].sort();
    const prev = owners[owners.length - 1];
    if (!prev || prev[1].join() !== macs.join()) owners.push([round3((r.t - from) / 1000), macs]);
  }
  const ok = answered(opts.reads, from, to);
  const seen = ok.find((x) => x.r.unschedulable === true);
  const removedAt = opts.removedAt;
  const back = removedAt === undefined ? undefined : ok.find((x) => x.r.t >= removedAt);
  return {
    dark_s: sec(win.filter((r) => r.macs.length === 0).length),
    dual_s: sec(win.filter((r) => new Set(r.macs).size >= 2).length),
    api_unavailable_s: round3(longestGap(ok, from, to) / 1000),
    cluster_api_unavailable_s: opts.directReads
      ? round3(longestGap(answered(opts.directReads, from, to), from, to) / 1000)
      : null,
    silenced_s: lastDrained ? round3((lastDrained.t - from) / 1000) : null,
    drain_seen_s: seen ? round3((seen.at - from) / 1000) : null,
    api_back_s: back && removedAt !== undefined ? round3((back.at - removedAt) / 1000) : null,
    owners,
  };
}

/** The 200s in the window, in the order they came (by answer time). */
function answered(reads: ApiRead[], from: number, to: number): { at: number; r: ApiRead }[] {
  return reads
    .filter((r) => r.code === 200)
    .map((r) => ({ at: r.t + r.ms, r }))
    .filter((x) => x.at >= from && x.at <= to)
    .sort((a, b) => a.at - b.at);
}

/** The longest stretch from one 200 (or the window's start) to the next (or the window's end). */
function longestGap(ok: { at: number }[], from: number, to: number): number {
  let longest = 0;
  let last = from;
  for (const x of ok) {
    longest = Math.max(longest, x.at - last);
    last = x.at;
  }
  return Math.max(longest, to - last);
}
