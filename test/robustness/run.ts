// make robustness: randomized faults during drains on the lab cluster, invariants checked from
// the outside, every violation replayable (issue 24; docs/robustness.md).
//   SEED     the run's seed (default: from the clock, printed)
//   TRIALS   how many trials (default 20): trials FROM..FROM+TRIALS-1; TRIALS=0 with FROM prints
//            the table of the trials 0..FROM-1 recorded in OUT (no cluster)
//   FROM     the first trial (default 0): a run cut short continued with the same SEED and OUT; the
//            table then covers trials 0..FROM+TRIALS-1, the earlier ones from OUT/results.jsonl
//   STOP_AFTER_MIN  no trial starts after this many minutes: the table of those finished, and the
//            FROM= that continues the run
//   TRIAL    replay this one trial of SEED alone
//   SCRIPTED run this trial written by hand alone (scripted.ts: its names)
//   OUT      where the HTML timelines go (default $TMPDIR/drainguard-robustness-<seed>)
//   KEEP_LOGS=1  keep every trial's container logs (trial-<n>-logs/), not only a violating one's
//   CONTROL_PLANES=3  on the HA lab (cp-1..cp-3, each an etcd member and an API server, the speakers
//                     on them): the stale API server joins the fault kinds (IMPLEMENTED_HA)
// stdout: the table per fault kind, each violation with its replay command and timeline, the last
// line JSON {"bench":"robustness", seed, trials, fault_kinds, violations, max_dark_s, max_dual_s, …}.
// Progress on stderr.
import { appendFileSync, cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCluster } from '../../lab/cluster/cluster.ts';
import { LEASE, setUpScene, tokens } from '../../lab/cluster/robustness-scene.ts';
import { keepLogsSince, logSizes } from './log-slices.ts';
import { IMPLEMENTED, IMPLEMENTED_HA } from './nemesis.ts';
import { setUpNetfilter } from './netfilter.ts';
import { ACTIONS, planTrial, type TrialPlan } from './plan.ts';
import { renderText, renderTrialHtml, type Summary, summary, type TrialResult } from './report.ts';
import { earlierResults, resultLine, resultsPath } from './resume.ts';
import { SCRIPTED } from './scripted.ts';
import { runTrial } from './trial.ts';

export interface SuiteOptions {
  seed: number;
  /** The trial numbers to run. */
  trials: number[];
  out: string;
  /** Every trial's container logs kept, not only a violating one's. */
  keepLogs?: boolean;
  /** 3: on the HA lab (control-plane nodes only), with the stale API server among the faults. */
  controlPlanes?: number;
  /** No trial starts after this time (ms since the epoch). */
  stopAt?: number;
  /** Results of this seed's trials before the first one run here (FROM): in the table too. */
  earlier?: TrialResult[];
  /** Each finished trial appended to OUT/results.jsonl (not for a replay of one trial). */
  record?: boolean;
  /** Trials written by hand (plan.ts TrialPlan.scripted), run after the drawn ones, never recorded. */
  scripted?: TrialPlan[];
  note(line: string): void;
}

export interface SuiteRun {
  results: TrialResult[];
  text: string;
  summary: Summary;
}

/** Starts a lab cluster with the scene, runs the trials, writes each violating trial's timeline. */
export async function runSuite(opts: SuiteOptions): Promise<SuiteRun> {
  const { seed, note } = opts;
  mkdirSync(opts.out, { recursive: true });
  const ha = (opts.controlPlanes ?? 1) > 1;
  const kinds = ha ? IMPLEMENTED_HA : IMPLEMENTED;
  const html = new Map<number, string>();
  const results: TrialResult[] = [];
  const finish = (): SuiteRun => {
    const all = [...(opts.earlier ?? []), ...results];
    // An earlier part's violating trial has its timeline in OUT too.
    const htmlOf = (t: number) => {
      const path = html.get(t) ?? join(opts.out, `trial-${t}.html`);
      return existsSync(path) ? path : '';
    };
    return {
      results: all,
      text: renderText(seed, all, htmlOf, opts.controlPlanes),
      summary: summary(seed, all, opts.controlPlanes),
    };
  };
  // TRIALS=0 with FROM: the table of the trials recorded in OUT, no cluster.
  if (opts.trials.length === 0 && !opts.scripted?.length) return finish();
  const c = await startCluster({
    clients: ['client'],
    ...(ha ? { controlPlanes: opts.controlPlanes as number, nodes: [] } : {}),
    log: (l) => note(`cluster: ${l}`),
  });
  try {
    const plans = [
      ...opts.trials.map((trial) => planTrial(seed, trial, { kinds, actions: ACTIONS, ha })),
      ...(opts.scripted ?? []),
    ];
    const s = await setUpScene(c, {
      liveness: plans.some((p) => p.faults.some((f) => f.kind === 'liveness-failure')),
    });
    await setUpNetfilter(c);
    note(
      `scene ready: VIP ${s.vip} on ${s.nodes.join(', ')}, Lease ${LEASE}, netfilter cleanup and live pods on every node; faults ${kinds.join(', ')}`,
    );
    const ctx = { tokens: await tokens(s), logsSeen: new Map<string, number>(), note };
    for (const plan of plans) {
      const trial = plan.trial;
      if (opts.stopAt !== undefined && Date.now() >= opts.stopAt) {
        note(`time budget spent: stopped before trial ${trial}; continue with FROM=${trial} OUT=${opts.out}`);
        break;
      }
      const logsAt = logSizes(c.controlPlaneLogs());
      const { result, observations } = await runTrial(s, plan, ctx);
      results.push(result);
      if (opts.record && plan.scripted === undefined)
        appendFileSync(resultsPath(opts.out), resultLine(seed, opts.controlPlanes ?? 1, result));
      if (result.violations.length > 0 && observations) {
        const path = join(opts.out, `trial-${trial}.html`);
        writeFileSync(
          path,
          renderTrialHtml(result, observations, {
            nodes: s.nodes,
            leaseName: LEASE,
            startedAt: new Date(observations.startedAt ?? Date.now()).toISOString(),
          }),
        );
        html.set(trial, path);
      }
      // The pods' logs as they are now: the next trials delete pods, and the kubelet their logs.
      if (result.violations.length > 0 || opts.keepLogs) {
        for (const n of s.nodes)
          cpSync(join(c.dir, n, 'pod-logs'), join(opts.out, `trial-${trial}-logs`, n), { recursive: true });
        // The control plane's lines of this trial (kube-apiserver traces a request slower than 500 ms).
        keepLogsSince(c.controlPlaneLogs(), logsAt, join(opts.out, `trial-${trial}-logs`, 'control-plane'));
      }
    }
    s.client.close();
  } finally {
    await c.stop();
  }
  return finish();
}

if (import.meta.main) {
  const env = (k: string) => (process.env[k] ?? '').trim();
  const seed = env('SEED') ? Number(env('SEED')) : Date.now() % 1_000_000;
  const one = env('TRIAL');
  const scriptedName = env('SCRIPTED');
  const scripted = scriptedName ? SCRIPTED[scriptedName] : undefined;
  if (scriptedName && !scripted) {
    process.stderr.write(
      `SCRIPTED: "${scriptedName}" is not a scripted trial; accepted: ${Object.keys(SCRIPTED).join(', ')}\n`,
    );
    process.exit(2);
  }
  const count = env('TRIALS') ? Number(env('TRIALS')) : 20;
  const from = env('FROM') ? Number(env('FROM')) : 0;
  const stopAfterMin = env('STOP_AFTER_MIN') ? Number(env('STOP_AFTER_MIN')) : undefined;
  const controlPlanes = env('CONTROL_PLANES') ? Number(env('CONTROL_PLANES')) : 1;
  for (const [k, v] of [
    ['SEED', seed],
    ['TRIALS', count],
    ['TRIAL', one ? Number(one) : 0],
    ['FROM', from],
    ['STOP_AFTER_MIN', stopAfterMin ?? 0],
  ] as const)
    if (!Number.isSafeInteger(v) || v < 0) {
      process.stderr.write(`${k}: "${env(k)}" is not a whole number ≥ 0\n`);
      process.exit(2);
    }
  if (controlPlanes !== 1 && controlPlanes !== 3) {
    process.stderr.write(`CONTROL_PLANES: "${env('CONTROL_PLANES')}" is not accepted: 1 (default) or 3\n`);
    process.exit(2);
  }
  if (one && from > 0) {
    process.stderr.write('FROM and TRIAL: one or the other (TRIAL replays one trial alone)\n');
    process.exit(2);
  }
  const note = (l: string) => process.stderr.write(`[robustness] ${l}\n`);
  const out = env('OUT') || join(tmpdir(), `drainguard-robustness-${seed}`);
  // The trials before FROM, as an earlier run of this seed recorded them in OUT.
  const results = resultsPath(out);
  const earlier = earlierResults(
    from > 0 && existsSync(results) ? readFileSync(results, 'utf8') : '',
    seed,
    controlPlanes,
    from,
  );
  if (earlier.missing.length > 0) {
    const shown = earlier.missing.slice(0, 10).join(', ');
    process.stderr.write(
      `FROM=${from}: ${results} has no result of trial${earlier.missing.length > 1 ? 's' : ''} ${shown}${earlier.missing.length > 10 ? ', …' : ''} of seed ${seed}: FROM continues a run of the same SEED and OUT\n`,
    );
    process.exit(2);
  }
  note(
    `seed ${seed}${one ? `, trial ${one} alone` : `, ${count} trials from ${from}`}${from > 0 ? ` (0–${from - 1} from ${results})` : ''}${controlPlanes > 1 ? `, ${controlPlanes} control planes` : ''}`,
  );
  const run = await runSuite({
    seed,
    trials: scripted ? [] : one ? [Number(one)] : Array.from({ length: count }, (_, i) => from + i),
    ...(scripted ? { scripted: [{ ...scripted, seed }] } : {}),
    out,
    keepLogs: env('KEEP_LOGS') === '1',
    controlPlanes,
    ...(stopAfterMin !== undefined ? { stopAt: Date.now() + stopAfterMin * 60_000 } : {}),
    note,
    earlier: earlier.results,
    record: !one && !scripted,
  });
  process.stdout.write(run.text);
  process.exit(run.summary.violations > 0 || run.summary.errors > 0 ? 1 : 0);
}
