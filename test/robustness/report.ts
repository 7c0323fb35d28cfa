// The suite's report (pure): a table per fault kind, each violation with the command that replays
// its trial, the last line JSON; and for a violating trial its timeline in the demo's HTML format
// (demo/report.ts).
import { renderReport } from '../../demo/report.ts';
import type { Timeline } from '../../demo/timeline.ts';
import { formatTable } from '../../shared/table.ts';
import type { Violation } from './checks.ts';
import type { TrialObservations } from './observations.ts';
import { describePlan, type FaultKind, type TrialPlan } from './plan.ts';

export interface TrialResult {
  plan: TrialPlan;
  /** The action drained a node (drain, uncordon mid-handover). */
  drained: boolean;
  darkMs: number;
  dualMs: number;
  violations: Violation[];
  /** The runner could not carry the trial out (not a verdict on drainguard). */
  error?: string;
  /** Faults that found nothing to strike (their pod or container already gone): not injected. */
  skipped?: string[];
  /** Dark time not counted against the 1 s: the VIP's owner blind (checks.ts BLIND_OWNER_BOUND_MS). */
  blindOwnerMs?: number;
}

export const replayCommand = (seed: number, trial: number, controlPlanes = 1) =>
  `make robustness${controlPlanes > 1 ? ` CONTROL_PLANES=${controlPlanes}` : ''} SEED=${seed} TRIAL=${trial}`;

/** How a trial is run again: a drawn one by its seed and number, a scripted one by its name. */
export const replayOf = (plan: TrialPlan, controlPlanes = 1) =>
  plan.scripted === undefined
    ? replayCommand(plan.seed, plan.trial, controlPlanes)
    : `make robustness SCRIPTED=${plan.scripted}`;

const s = (ms: number) => (ms / 1000).toFixed(2);

interface Row {
  trials: number;
  drains: number;
  darkMs: number;
  dualMs: number;
  violations: number;
}

function rowOf(rs: TrialResult[]): Row {
  return {
    trials: rs.length,
    drains: rs.filter((r) => r.drained).length,
    darkMs: Math.max(0, ...rs.map((r) => r.darkMs)),
    dualMs: Math.max(0, ...rs.map((r) => r.dualMs)),
    violations: rs.reduce((n, r) => n + r.violations.length, 0),
  };
}

/** One row per fault kind that ran (a trial counts under each of its faults), then all trials. */
export function faultTable(results: TrialResult[]): string {
  const kinds = [...new Set(results.flatMap((r) => r.plan.faults.map((f) => f.kind)))].sort();
  const line = (name: string, r: Row) => [
    name,
    String(r.trials),
    String(r.drains),
    s(r.darkMs),
    s(r.dualMs),
    String(r.violations),
  ];
  return formatTable([
    ['fault kind', 'trials', 'drains', 'longest dark (s)', 'longest dual (s)', 'violations'],
    ...kinds.map((k) => line(k, rowOf(results.filter((r) => r.plan.faults.some((f) => f.kind === k))))),
    line('all trials', rowOf(results)),
  ]);
}

export interface Summary {
  bench: 'robustness';
  seed: number;
  /** The HA lab's (CONTROL_PLANES=3); absent on the single control plane. */
  control_planes?: number;
  trials: number;
  fault_kinds: FaultKind[];
  violations: number;
  max_dark_s: number;
  max_dual_s: number;
  errors: number;
  /** Faults planned but not injected (nothing left to strike). */
  not_injected: number;
  /** Trials with dark time not counted because the VIP's owner was blind. */
  blind_owner_trials: number;
  /** Each violating trial and how to replay it. */
  failed: { trial: number; replay: string; invariants: string[] }[];
}

export function summary(seed: number, results: TrialResult[], controlPlanes = 1): Summary {
  const all = rowOf(results);
  return {
    bench: 'robustness',
    seed,
    ...(controlPlanes > 1 ? { control_planes: controlPlanes } : {}),
    trials: results.length,
    fault_kinds: [...new Set(results.flatMap((r) => r.plan.faults.map((f) => f.kind)))].sort(),
    violations: all.violations,
    max_dark_s: Number(s(all.darkMs)),
    max_dual_s: Number(s(all.dualMs)),
    errors: results.filter((r) => r.error !== undefined).length,
    not_injected: results.reduce((n, r) => n + (r.skipped?.length ?? 0), 0),
    blind_owner_trials: results.filter((r) => (r.blindOwnerMs ?? 0) > 0).length,
    failed: results
      .filter((r) => r.violations.length > 0)
      .map((r) => ({
        trial: r.plan.trial,
        replay: replayOf(r.plan, controlPlanes),
        invariants: [...new Set(r.violations.map((v) => v.invariant))],
      })),
  };
}

/** The whole text report: the table, each violation with its replay, errors, the JSON line last. */
export function renderText(
  seed: number,
  results: TrialResult[],
  htmlOf?: (trial: number) => string,
  controlPlanes = 1,
): string {
  const lines = [faultTable(results), ''];
  for (const r of results) {
    const blind = r.blindOwnerMs ?? 0;
    if (r.violations.length === 0 && r.error === undefined && !r.skipped?.length && blind === 0) continue;
    lines.push(`trial ${r.plan.trial}: ${describePlan(r.plan)}`);
    for (const v of r.violations)
      lines.push(`  ✖ ${v.invariant}${v.t === undefined ? '' : ` at ${s(v.t)} s`}: ${v.detail}`);
    if (r.error !== undefined) lines.push(`  ! not carried out: ${r.error}`);
    for (const k of r.skipped ?? []) lines.push(`  – not injected: ${k}`);
    if (blind > 0)
      lines.push(
        `  ○ dark not counted: ${s(blind)} s, the VIP's owner blind (its speaker stopped while its path to the API was cut; docs/robustness.md)`,
      );
    lines.push(`  replay: ${replayOf({ ...r.plan, seed }, controlPlanes)}`);
    const html = r.violations.length > 0 ? htmlOf?.(r.plan.trial) : undefined;
    if (html) lines.push(`  timeline: ${html}`);
  }
  lines.push(JSON.stringify(summary(seed, results, controlPlanes)));
  return `${lines.join('\n')}\n`;
}

/** A violating trial's timeline, as the demo draws its drain (first VIP, Lease holders, marks). */
export function trialTimeline(
  r: TrialResult,
  o: TrialObservations,
  opts: { nodes: string[]; leaseName: string; startedAt: string; holderNodes?: Record<string, string> },
): Timeline {
  const [vip, rounds] = Object.entries(o.arp)[0] ?? ['(no VIP)', []];
  return {
    title: `robustness seed ${r.plan.seed} trial ${r.plan.trial}: ${describePlan(r.plan)}`,
    startedAt: opts.startedAt,
    endT: o.endT,
    nodes: opts.nodes,
    vip,
    leaseName: opts.leaseName,
    ...(opts.holderNodes ? { holderNodes: opts.holderNodes } : {}),
    arp: rounds.map((a) => ({ t: a.t, nodes: a.nodes })),
    lease: o.holders,
    events: [
      ...r.violations.map((v) => ({
        t: v.t ?? o.settledT,
        source: `violation: ${v.invariant}`,
        text: v.detail,
      })),
      ...o.fences.map((f) => ({ t: f.t, source: `Node ${f.node} L2 state`, text: 'fence reported' })),
      ...o.leaderEvents.map((e) => ({ t: e.t, source: `candidate ${e.identity}`, text: e.ev })),
    ],
    marks: [...o.marks, { t: o.settledT, label: 'settled' }],
    gaps: [
      {
        name: 'longest dark window',
        measuredMs: r.darkMs,
        baselineMs: 1000,
        baselineNote: 'the limit where a node could serve',
        measuredFrom: 'ARP probes',
      },
      {
        name: 'longest dual window',
        measuredMs: r.dualMs,
        baselineMs: 100,
        baselineNote: 'the limit after a fence was reported',
        measuredFrom: 'ARP probes',
      },
    ],
  };
}

export const renderTrialHtml = (...args: Parameters<typeof trialTimeline>) =>
  renderReport(trialTimeline(...args));
