// One tap lane of `make test` (scripts/test.ts): tap runs the lane's files, its TAP stream is
// parsed here and printed as a tree prefixed with the lane, and a summary counts what ran. A lane
// ends when its tap process has exited, even when a process a test file started (and that
// survived it) still holds the lane's output open: CI's cut at 90 minutes must never be what ends
// a run. stopLane() stops a lane for sure: SIGTERM to its process group (tap and the running test
// file, whose exit hooks stop what it started), SIGKILL if it is still there after a grace period.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Parser, type Result } from 'tap-parser';
import YAML from 'yaml';

const ROOT = new URL('..', import.meta.url).pathname;
const TAP = `${ROOT}node_modules/tap/dist/esm/run.mjs`;
/** How long a lane's output may stay open after its tap exited. */
export const OUTPUT_GRACE_MS = 10_000;

export interface Failure {
  lane: string;
  path: string;
  diag: unknown;
}
export interface Summary {
  lane: string;
  files: number;
  tests: number;
  pass: number;
  fail: number;
  skip: number;
  todo: number;
  asserts: number;
  failures: Failure[];
  /** The files reported so far, with how long each took. */
  times: { path: string; ms: number }[];
  code: number | null;
  ms: number;
}

/** The parts of a failed point's diagnostic a reader needs, as indented YAML. */
export function brief(diag: unknown, pad: string): string {
  const d = (diag ?? {}) as Record<string, unknown>;
  const at = d.at as { fileName?: string; lineNumber?: number } | undefined;
  const out: Record<string, unknown> = {};
  if (at?.fileName) out.at = `${at.fileName}:${at.lineNumber ?? '?'}`;
  // expired, handles, requests: what tap says held a file that timed out (its open handles).
  for (const k of [
    'message',
    'found',
    'wanted',
    'pattern',
    'diff',
    'tapCaught',
    'exitCode',
    'signal',
    'expired',
    'handles',
    'requests',
  ])
    if (d[k] !== undefined) out[k] = typeof d[k] === 'string' ? (d[k] as string).slice(0, 2000) : d[k];
  if (out.diff === undefined && typeof d.stack === 'string') out.stack = d.stack.slice(0, 2000);
  if (Object.keys(out).length === 0) return `${pad}(no diagnostic: the lines printed for this file say why)`;
  return YAML.stringify(out, { lineWidth: 0 })
    .trimEnd()
    .split('\n')
    .map((l) => `${pad}${l}`)
    .join('\n');
}

// Ctrl-C or a CI timeout stops the lanes too (stopLanes): without it, tap (its process title is
// "tap") would go on starting test files after this runner has gone.
/** Each running lane, and how it prints a line of its own. */
const lanesRunning = new Map<ChildProcess, (line: string) => void>();
const STARTED = Date.now();
export const sinceStart = () => `${((Date.now() - STARTED) / 60_000).toFixed(1)} min`;

/** How many lanes have not ended yet. */
export const lanesLeft = () => lanesRunning.size;

function signalLane(child: ChildProcess, sig: NodeJS.Signals): void {
  try {
    // The lane's process group: tap and the test file it is running.
    process.kill(-(child.pid as number), sig);
  } catch {
    child.kill(sig);
  }
}

/**
 * Stops every running lane: `sig` to each lane's process group, then SIGKILL to the groups still
 * there after graceMs (a test file whose exit hooks hang, a tap that keeps starting files).
 */
export function stopLanes(sig: NodeJS.Signals, graceMs = 60_000): void {
  for (const c of lanesRunning.keys()) signalLane(c, sig);
  setTimeout(() => {
    for (const [c, say] of lanesRunning) {
      say(`still running ${graceMs / 1000} s after ${sig}: SIGKILL`);
      signalLane(c, 'SIGKILL');
    }
  }, graceMs).unref();
}

export function runLane(
  lane: string,
  testFiles: string[],
  args: string[],
  opts: { outputGraceMs?: number; write?: (text: string) => void } = {},
): Promise<Summary> {
  const write = opts.write ?? ((text: string) => process.stdout.write(text));
  const started = Date.now();
  const child = spawn(process.execPath, [TAP, '--reporter=tap', '--no-color', ...args, ...testFiles], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // its own process group, so stopLanes reaches the running test file too
  });
  const s: Summary = {
    lane,
    files: 0,
    tests: 0,
    pass: 0,
    fail: 0,
    skip: 0,
    todo: 0,
    asserts: 0,
    failures: [],
    times: [],
    code: null,
    ms: 0,
  };
  const prefix = `[${lane}] `.padEnd(10);
  const print = (depth: number, text: string) =>
    write(
      text
        .split('\n')
        .map((l) => `${prefix}${'  '.repeat(Math.max(0, depth))}${l}\n`)
        .join(''),
    );
  lanesRunning.set(child, (line) => print(0, line));
  // depth 0: the runner's stream, whose points are files; depth 1: a file; deeper: tests.
  const attach = (p: Parser, depth: number, path: string[]) => {
    let pendingChild: string | undefined;
    p.on('child', (c: Parser) => {
      pendingChild = c.name;
      if (depth === 0) print(0, `▶ ${c.name}`);
      attach(c, depth + 1, [...path, c.name]);
    });
    p.on('comment', (line: string) => {
      if (!/^# (time=|Subtest:|\{ total|No coverage generated)/.test(line.trim()))
        print(Math.max(0, depth - 1), line.trimEnd());
    });
    p.on('extra', (data: string) => {
      const text = data.trimEnd();
      if (text) print(Math.max(0, depth - 1), text);
    });
    p.on('assert', (res: Result) => {
      const isTest = pendingChild !== undefined && pendingChild === res.name;
      pendingChild = undefined;
      const time = res.time === null ? '' : ` (${Math.round(res.time)} ms)`;
      if (isTest && depth === 0) {
        s.files++;
        s.times.push({ path: res.name, ms: res.time ?? 0 });
        print(0, `${res.ok ? '✔' : '✖'} ${res.name}${time} · ${sinceStart()}`);
        // a file that failed to load or crashed outside any test shows up only here
        if (!res.ok && !s.failures.some((f) => f.path.startsWith(`${res.name} › `)))
          s.failures.push({ lane, path: res.name, diag: res.diag });
        return;
      }
      if (isTest) {
        s.tests++;
        if (res.todo) s.todo++;
        else if (res.skip) s.skip++;
        else if (res.ok) s.pass++;
        else s.fail++;
        print(
          depth - 1,
          `${res.ok ? '✔' : '✖'} ${res.name}${time}${res.skip ? ' # SKIP' : ''}${res.todo ? ' # TODO' : ''}`,
        );
        return;
      }
      s.asserts++;
      if (!res.ok && !res.todo) {
        print(depth - 1, `✖ ${res.name}`);
        if (res.diag) print(depth, brief(res.diag, ''));
        s.failures.push({ lane, path: [...path, res.name].join(' › '), diag: res.diag });
      }
    });
  };
  const parser = new Parser();
  attach(parser, 0, []);
  child.stdout.pipe(parser);
  createInterface({ input: child.stderr }).on('line', (line) => write(`${prefix}${line}\n`));
  return new Promise((resolve) => {
    const end = (code: number | null) => {
      if (!lanesRunning.delete(child)) return;
      resolve({ ...s, code, ms: Date.now() - started });
    };
    child.once('close', end);
    // A process a test file started and that outlived it (its exit hooks never ran: SIGKILL after
    // a timeout) can hold the lane's output open for ever; tap has finished all the same.
    child.once('exit', (code) => {
      setTimeout(() => {
        if (!lanesRunning.has(child)) return;
        print(
          0,
          "tap exited, but a process a test file started still holds this lane's output: not waiting for it",
        );
        child.stdout.destroy();
        child.stderr.destroy();
        end(code);
      }, opts.outputGraceMs ?? OUTPUT_GRACE_MS).unref();
    });
  });
}
