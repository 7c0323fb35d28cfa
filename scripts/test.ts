// `make test`'s runner: tap runs three lanes side by side, and this prints one summary that counts
// every test. The lab-cluster lane (test/e2e/cluster, test/e2e/demo: one lab cluster at a time),
// the main lane (unit files side by side, then the L2 handover, fail-safe and fence files one at a
// time, as `.taprc` says) and the beds lane (every other bed file, one at a time). Each lane
// mostly waits on kubelets, controllers and timers, so three lanes on two cores cut the wall time
// to the longest lane's. Each lane's TAP stream is parsed here: lines are printed as a tree
// prefixed with their lane and, per file, the minutes since the run started; every failed
// assertion is printed again at the end with its test's path, and the slowest files after, so
// the last lines of a CI log say what failed and where the time went.
//   node scripts/test.ts [--lane main|beds|cluster] [--coverage] [--stop-at EPOCH_S] [path-substring ...]
// Path substrings keep only the matching files (for a quick run of one area). A lane runs only
// `*.test.ts` files: the benchmarks (test/bench/, `make bench-*`) are never part of a lane.
// --coverage (make coverage) runs the main lane only with tap's coverage on; the cluster lane's
// product code runs inside containers, where tap cannot measure it.
// --stop-at: at that time (seconds since the epoch) the lanes are stopped (scripts/lanes.ts: SIGTERM,
// SIGKILL a minute later) and the summary is
// printed, naming the files not reported; `make test` sets it 4 minutes before CI's 90 would
// cut the run off without one.
import { globSync } from 'node:fs';
import { brief, lanesLeft, runLane, sinceStart, stopLanes } from './lanes.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const CLUSTER_DIRS = ['test/e2e/cluster/', 'test/e2e/demo/'];
// The L2 files the main lane runs after the unit files: the handover, the fail-safe and the
// fence, 1437 s of the 2073 s all L2 files took one after the other (clean clone, 2026-11-29).
// Every other bed file runs in the beds lane: the other L2 files (636 s), bed/ (211 s), lease/
// (370 s), cli, helm, netfilter, sidecar and webhook (329 s). With two lanes (the main lane held
// every L2 and bed file) the main lane took 2504 s and the cluster lane 2352 s. Beds run side by
// side safely: namespaces named by pid, a /24 each under a machine-wide lock, free ports.
const MAIN_L2 = /^test\/e2e\/l2\/(handover|failsafe|fence)[^/]*\.test\.ts$/;

const files = (pattern: string) => globSync(pattern, { cwd: ROOT }).sort();
const e2e = files('test/e2e/**/*.test.ts');
const inClusterLane = (f: string) => CLUSTER_DIRS.some((d) => f.startsWith(d));
const LANES: Record<string, { files: string[]; args: string[] }> = {
  main: {
    files: [...files('test/unit/**/*.test.ts'), ...e2e.filter((f) => MAIN_L2.test(f))],
    args: ['--jobs=2'],
  },
  beds: {
    files: e2e.filter((f) => !MAIN_L2.test(f) && !inClusterLane(f)),
    args: ['--jobs=1'],
  },
  // One process at a time, and a file runs long: the cluster file is every suite on one cluster.
  cluster: {
    files: e2e.filter(inClusterLane),
    args: ['--jobs=1', '--timeout=2400'],
  },
};

for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.on(sig, () => {
    process.stdout.write(`\n${sig}: stopping ${lanesLeft()} lane(s)\n`);
    stopLanes(sig);
    process.exitCode = 130;
  });

const argv = process.argv.slice(2);
const flag = (name: string) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const coverage = argv.includes('--coverage');
const only = coverage ? 'main' : flag('--lane');
if (only !== undefined && !(only in LANES)) {
  process.stderr.write(`--lane: "${only}" is not a lane; lanes are ${Object.keys(LANES).join(', ')}\n`);
  process.exit(2);
}
const stopAt = flag('--stop-at');
if (stopAt !== undefined && !/^[0-9]+$/.test(stopAt)) {
  process.stderr.write(`--stop-at: "${stopAt}" is not a time in seconds since the epoch\n`);
  process.exit(2);
}
const picks = argv.filter(
  (a, i) => !a.startsWith('--') && !['--lane', '--stop-at'].includes(argv[i - 1] ?? ''),
);
const lanes = Object.entries(LANES)
  .filter(([name]) => only === undefined || name === only)
  .map(
    ([name, l]) =>
      [
        name,
        { ...l, files: l.files.filter((f) => picks.length === 0 || picks.some((p) => f.includes(p))) },
      ] as const,
  )
  .filter(([, l]) => l.files.length > 0);
for (const [name, l] of lanes) process.stdout.write(`lane ${name}: ${l.files.length} files\n`);
const extra = coverage
  ? ['--no-disable-coverage', '--allow-incomplete-coverage', '--coverage-report=none']
  : [];
const running = lanes.map(([name, l]) => ({
  name,
  files: l.files,
  summary: runLane(name, l.files, [...l.args, ...extra]),
}));
// CI cuts a run off at 90 minutes with no summary: stop first, and say what had not finished.
let deadlineHit = false;
if (stopAt !== undefined) {
  const deadline = setTimeout(
    () => {
      deadlineHit = true;
      process.stdout.write(`\n--stop-at reached after ${sinceStart()}: stopping ${lanesLeft()} lane(s)\n`);
      stopLanes('SIGTERM');
    },
    Math.max(0, Number(stopAt) * 1000 - Date.now()),
  );
  deadline.unref();
}
const results = await Promise.all(running.map((r) => r.summary));

const sum = (k: 'files' | 'tests' | 'pass' | 'fail' | 'skip' | 'todo' | 'asserts') =>
  results.reduce((n, r) => n + r[k], 0);
const failures = results.flatMap((r) => r.failures);
process.stdout.write('\n');
if (failures.length > 0) {
  process.stdout.write(`failed (${failures.length}):\n`);
  for (const f of failures) {
    process.stdout.write(`[${f.lane}] ✖ ${f.path}\n`);
    process.stdout.write(`${brief(f.diag, '    ')}\n`);
  }
  process.stdout.write('\n');
}
const slowest = results
  .flatMap((r) => r.times.map((t) => ({ ...t, lane: r.lane })))
  .sort((a, b) => b.ms - a.ms)
  .slice(0, 12);
process.stdout.write('slowest files:\n');
for (const t of slowest)
  process.stdout.write(`  ${(t.ms / 1000).toFixed(0).padStart(5)} s  [${t.lane}] ${t.path}\n`);
for (const r of running) {
  const reported = new Set(results.find((x) => x.lane === r.name)?.times.map((t) => t.path));
  const left = r.files.filter((f) => !reported.has(f));
  if (left.length > 0) process.stdout.write(`lane ${r.name}: not reported: ${left.join(', ')}\n`);
}
for (const r of results)
  process.stdout.write(
    `lane ${r.lane}: files ${r.files}, tests ${r.tests}, pass ${r.pass}, fail ${r.fail}, skipped ${r.skip}, ` +
      `todo ${r.todo}, assertions ${r.asserts}, ${(r.ms / 1000).toFixed(0)} s, exit ${r.code}\n`,
  );
process.stdout.write(
  `all: files ${sum('files')}, tests ${sum('tests')}, pass ${sum('pass')}, fail ${sum('fail')}, ` +
    `skipped ${sum('skip')}, todo ${sum('todo')}, assertions ${sum('asserts')}\n`,
);
// The conventional closing line CI tools read, alone on its line.
process.stdout.write(`${sum('pass')} passed, ${sum('fail')} failed, ${sum('skip')} skipped\n`);
const expectedFiles = lanes.reduce((n, [, l]) => n + l.files.length, 0);
const ok =
  results.every((r) => r.code === 0) &&
  sum('fail') === 0 &&
  failures.length === 0 &&
  sum('files') === expectedFiles;
if (sum('files') !== expectedFiles)
  process.stdout.write(`only ${sum('files')} of ${expectedFiles} files reported\n`);
// A skipped test is a test that did not run: CI provides what every test needs.
if (sum('skip') + sum('todo') > 0) process.stdout.write('skipped or todo tests are not allowed\n');
if (deadlineHit) process.stdout.write(`stopped by --stop-at after ${sinceStart()}\n`);
process.exit(process.exitCode === 130 ? 130 : ok && !deadlineHit && sum('skip') + sum('todo') === 0 ? 0 : 1);
