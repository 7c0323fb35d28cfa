// The invariants of issue 24, each a pure function over a trial's observations (observations.ts)
// that returns the violations it finds — none for a clean history. Thresholds are the issue's.
import type { ArpRound, EligibleSample, FenceReport, TrialObservations } from './observations.ts';

/** A VIP some eligible node could serve may go unanswered this long, no longer. */
export const DARK_LIMIT_MS = 1_000;
/** Two MACs may answer this long after a fence was reported, no longer. */
export const DUAL_LIMIT_MS = 100;

export const INVARIANTS = {
  dark: `a VIP some eligible node could serve is answered, except windows ≤ ${DARK_LIMIT_MS / 1000} s`,
  dual: `a VIP is never answered by two nodes for more than ${DUAL_LIMIT_MS / 1000} s after a fence was reported`,
  'split-brain': "a Lease's two candidates never both act as leader for longer than RenewDeadline",
  'live-rule-deleted': "no live pod's netfilter rule is deleted",
  'left-behind': 'after the settle, no drainguard label, annotation, fence or memberlist cut is left',
  'not-single-after-settle': 'after the settle, every VIP is answered by exactly one node',
  'sidecar-exit': 'no sidecar exits unless the nemesis killed it',
  'container-restart': 'no container restarts unless the nemesis killed or failed it',
  'token-logged': 'nothing logs a token',
} as const;
export type Invariant = keyof typeof INVARIANTS;

export interface Violation {
  invariant: Invariant;
  detail: string;
  /** When it started (ms from the trial's start), when it has a time. */
  t?: number;
}

export interface Window {
  from: number;
  to: number;
}

/**
 * Maximal runs of probe rounds that satisfy `pred`. A round stands until the next one (the last
 * until endT): a run lasts from its first round to the first round after it that does not match.
 */
export function windows(rounds: ArpRound[], endT: number, pred: (r: ArpRound) => boolean): Window[] {
  const sorted = [...rounds].sort((a, b) => a.t - b.t);
  const out: Window[] = [];
  let open: number | undefined;
  for (const r of sorted) {
    if (pred(r)) open ??= r.t;
    else if (open !== undefined) {
      out.push({ from: open, to: r.t });
      open = undefined;
    }
  }
  if (open !== undefined) out.push({ from: open, to: Math.max(open, endT) });
  return out;
}

export const darkWindows = (rounds: ArpRound[], endT: number) =>
  windows(rounds, endT, (r) => r.nodes.length === 0);
export const dualWindows = (rounds: ArpRound[], endT: number) =>
  windows(rounds, endT, (r) => new Set(r.nodes).size > 1);

const longest = (ws: Window[]) => Math.max(0, ...ws.map((w) => w.to - w.from));

/**
 * How much of [from, to) some node could serve the VIP. Before the first sample nothing is known,
 * and that time counts as servable: a trial that recorded no eligibility is held to the limit.
 */
export function eligibleMs(from: number, to: number, eligible: EligibleSample[]): number {
  const sorted = [...eligible].sort((a, b) => a.t - b.t);
  let ms = 0;
  let cursor = from;
  let serving = true;
  for (const s of sorted) {
    if (s.t >= to) break;
    if (s.t > cursor) {
      if (serving) ms += s.t - cursor;
      cursor = s.t;
    }
    serving = s.nodes.length > 0;
  }
  if (serving && to > cursor) ms += to - cursor;
  return ms;
}

/**
 * The one dark drainguard cannot bound by 1 s (docs/robustness.md, "A blind VIP owner"): the VIP
 * owner's speaker stops while the owner's path to the API is cut. The kubelet restarts it at once;
 * the new one answers the peers' memberlist probes under the same name, so they keep it as the
 * owner, but it cannot read what to announce. Nothing else tells the peers: drainguard's label
 * needs the API. Its fail-safe cut does: the API noticed down ≤ 4 s after the stop (a read's 3 s
 * timeout, hedged at 0.75 s, on a path that drops packets), the fail-safe's grace (5 s), then
 * memberlist's dead timeout (5 s, the 3-node timing). Or the path comes back: drainguard notices
 * within its probe's second and labels. From the stop until the earlier of those, a dark window
 * of the owner's VIP is not counted; before and after it, the 1 s holds.
 */
export const BLIND_OWNER_BOUND_MS = 14_000;
/** After the path comes back: drainguard asks the API once a second while it is down. */
export const API_BACK_NOTICE_MS = 1_000;

/** When `node` is a blind VIP owner (its speaker stopped while its path to the API was cut). */
export function blindOwnerWindows(o: TrialObservations, node: string): Window[] {
  return (o.speakerStops ?? [])
    .filter((s) => s.node === node)
    .flatMap((s) =>
      (o.apiCuts ?? [])
        .filter((c) => c.node === node && c.from <= s.t && s.t < c.to)
        .map((c) => ({ from: s.t, to: Math.min(c.to + API_BACK_NOTICE_MS, s.t + BLIND_OWNER_BOUND_MS) })),
    );
}

/** Who answered in the last round before `t` (the VIP's owner when a dark window starts). */
const ownersBefore = (rounds: ArpRound[], t: number) =>
  [...rounds]
    .filter((r) => r.t < t && r.nodes.length > 0)
    .sort((a, b) => a.t - b.t)
    .at(-1)?.nodes ?? [];

/** Each dark window: how long it counts, and how much of it was not counted (its owner blind). */
function darkAccounts(o: TrialObservations) {
  return Object.entries(o.arp).flatMap(([vip, rounds]) =>
    darkWindows(rounds, o.endT).map((w) => {
      const blind = ownersBefore(rounds, w.from).flatMap((n) => blindOwnerWindows(o, n));
      // Blind windows of one stop and cut do not overlap each other's counted part twice:
      // merged first.
      const excusedMs = merged(blind)
        .map((b) => ({ from: Math.max(b.from, w.from), to: Math.min(b.to, w.to) }))
        .filter((b) => b.to > b.from)
        .reduce((sum, b) => sum + eligibleMs(b.from, b.to, o.eligible), 0);
      return { vip, w, ms: eligibleMs(w.from, w.to, o.eligible) - excusedMs, excusedMs };
    }),
  );
}

/** The longest dark time not counted in one window because its owner was blind (report.ts). */
export const blindOwnerMs = (o: TrialObservations) => Math.max(0, ...darkAccounts(o).map((a) => a.excusedMs));

export function checkDark(o: TrialObservations): Violation[] {
  return darkAccounts(o)
    .filter(({ ms }) => ms > DARK_LIMIT_MS)
    .map(({ vip, w, ms, excusedMs }) => ({
      invariant: 'dark' as const,
      t: w.from,
      detail: `${vip} unanswered ${ms} ms while a node could serve it (${w.from}–${w.to} ms${excusedMs > 0 ? `; ${excusedMs} ms more not counted: its owner blind` : ''})`,
    }));
}

/** Overlapping windows joined. */
function merged(ws: Window[]): Window[] {
  const out: Window[] = [];
  for (const w of [...ws].sort((a, b) => a.from - b.from)) {
    const last = out.at(-1);
    if (last && w.from <= last.to) last.to = Math.max(last.to, w.to);
    else out.push({ ...w });
  }
  return out;
}

const fencedAt = (fences: FenceReport[], node: string, t: number) =>
  fences.some((f) => f.node === node && f.t <= t && (f.liftedT === undefined || t < f.liftedT));

export function checkDual(o: TrialObservations): Violation[] {
  return Object.entries(o.arp).flatMap(([vip, rounds]) =>
    windows(
      rounds,
      o.endT,
      (r) => new Set(r.nodes).size > 1 && r.nodes.some((n) => fencedAt(o.fences, n, r.t)),
    )
      .filter((w) => w.to - w.from > DUAL_LIMIT_MS)
      .map((w) => {
        const r = rounds.find((x) => x.t === w.from);
        return {
          invariant: 'dual' as const,
          t: w.from,
          detail: `${vip} answered by ${[...new Set(r?.nodes)].sort().join(' and ')} for ${w.to - w.from} ms after a fence was reported (${w.from}–${w.to} ms)`,
        };
      }),
  );
}

/** Each candidate's intervals of leader work, from its own log; one still open ends at endT. */
export function leaderIntervals(o: TrialObservations): { identity: string; from: number; to: number }[] {
  const out: { identity: string; from: number; to: number }[] = [];
  const open = new Map<string, number>();
  for (const e of [...o.leaderEvents].sort((a, b) => a.t - b.t)) {
    if (e.ev === 'leading') {
      if (!open.has(e.identity)) open.set(e.identity, e.t);
      continue;
    }
    const from = open.get(e.identity);
    if (from !== undefined) out.push({ identity: e.identity, from, to: e.t });
    open.delete(e.identity);
  }
  for (const [identity, from] of open) out.push({ identity, from, to: Math.max(from, o.endT) });
  return out;
}

export function checkSplitBrain(o: TrialObservations): Violation[] {
  const ivs = leaderIntervals(o);
  const out: Violation[] = [];
  for (const [i, a] of ivs.entries())
    for (const b of ivs.slice(i + 1)) {
      if (a.identity === b.identity) continue;
      const overlap = Math.min(a.to, b.to) - Math.max(a.from, b.from);
      if (overlap > o.renewDeadlineMs)
        out.push({
          invariant: 'split-brain',
          t: Math.max(a.from, b.from),
          detail: `${a.identity} and ${b.identity} both acted as leader for ${overlap} ms (RenewDeadline ${o.renewDeadlineMs} ms)`,
        });
    }
  return out;
}

export function checkLiveRules(o: TrialObservations): Violation[] {
  return o.netfilter
    .filter((p) => p.live)
    .flatMap((p) => {
      const gone = p.before.filter((r) => !p.after.includes(r));
      return gone.length === 0
        ? []
        : [
            {
              invariant: 'live-rule-deleted' as const,
              detail: `live pod ${p.pod} lost ${gone.length} rule(s): ${gone.join('; ')}`,
            },
          ];
    });
}

export function checkLeftovers(o: TrialObservations): Violation[] {
  return o.leftovers
    .filter((l) => l.what.length > 0)
    .map((l) => ({
      invariant: 'left-behind' as const,
      t: o.settledT,
      detail: `${l.node}: ${l.what.join(', ')}`,
    }));
}

export function checkSettled(o: TrialObservations): Violation[] {
  return Object.entries(o.settledArp).flatMap(([vip, rounds]) => {
    const answering = [...new Set(rounds.flatMap((r) => r.nodes))].sort();
    const bad = rounds.filter((r) => new Set(r.nodes).size !== 1);
    if (rounds.length > 0 && answering.length === 1 && bad.length === 0) return [];
    return [
      {
        invariant: 'not-single-after-settle' as const,
        t: o.settledT,
        detail:
          rounds.length === 0
            ? `${vip}: no probe round after the settle`
            : `${vip} after the settle: answered by ${answering.join(', ') || 'nobody'}; ${bad.length} of ${rounds.length} rounds not answered by exactly one node`,
      },
    ];
  });
}

export function checkExits(o: TrialObservations): Violation[] {
  return o.containers
    .filter(
      (c) => c.restartsAfter > c.restartsBefore && !o.injectedRestarts.includes(`${c.pod}/${c.container}`),
    )
    .map((c) => ({
      invariant: c.sidecar ? ('sidecar-exit' as const) : ('container-restart' as const),
      detail: `${c.pod}/${c.container} restarted ${c.restartsAfter - c.restartsBefore} time(s)${
        c.lastExit ? ` (last: ${c.lastExit.reason}, exit code ${c.lastExit.exitCode})` : ''
      }`,
    }));
}

export function checkTokens(o: TrialObservations): Violation[] {
  // A short string is no secret and would match by chance.
  const tokens = o.tokens.filter((t) => t.length >= 16);
  // The detail names the line, never quotes it: the report must not carry the token either.
  return o.logs.flatMap((l, i) =>
    tokens.some((t) => l.line.includes(t))
      ? [
          {
            invariant: 'token-logged' as const,
            detail: `${l.source} logged a token (line ${i + 1} recorded)`,
          },
        ]
      : [],
  );
}

export function checkAll(o: TrialObservations): Violation[] {
  return [
    ...checkDark(o),
    ...checkDual(o),
    ...checkSplitBrain(o),
    ...checkLiveRules(o),
    ...checkLeftovers(o),
    ...checkSettled(o),
    ...checkExits(o),
    ...checkTokens(o),
  ];
}

/** The trial's longest dark and dual windows (ms) over every VIP, whatever their cause. */
export function trialFigures(o: TrialObservations): { darkMs: number; dualMs: number } {
  const all = Object.values(o.arp);
  return {
    darkMs: Math.max(0, ...all.map((r) => longest(darkWindows(r, o.endT)))),
    dualMs: Math.max(0, ...all.map((r) => longest(dualWindows(r, o.endT)))),
  };
}
