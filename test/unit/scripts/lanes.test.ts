// `make test`'s lanes end for sure: CI's cut at 90 minutes, which prints nothing, must never be
// what ends a run (a clean-clone CI run, 2026-11-29, waited there 23 minutes on one lane).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { quietly } from '../../../lab/bed/exit.ts';
import { brief, runLane, stopLanes } from '../../../scripts/lanes.ts';
import { waitFor } from '../../../shared/clock.ts';

const FIXTURES = 'test/unit/scripts/fixtures';
const dir = mkdtempSync(join(tmpdir(), 'lanes-test-'));
const pidFile = join(dir, 'pid');
process.env.LANES_FIXTURE_PID_FILE = pidFile;
/** The pid a fixture wrote, once it has. */
const fixturePid = () =>
  waitFor(
    'the fixture to write its pid',
    () => {
      try {
        return Number(readFileSync(pidFile, 'utf8')) || undefined;
      } catch {
        return undefined;
      }
    },
    { timeoutMs: 30_000 },
  ) as Promise<number>;
const kill = (pid: number) => quietly(() => process.kill(pid, 'SIGKILL'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test('a lane ends when its tap has, though a process a test file left holds its output', async (t) => {
  const out: string[] = [];
  const started = Date.now();
  const lane = runLane('fix', [`${FIXTURES}/orphan-holds-output.ts`], ['--jobs=1'], {
    outputGraceMs: 500,
    write: (s) => out.push(s),
  });
  const orphan = await fixturePid();
  t.teardown(() => kill(orphan));
  const s = await lane;
  t.doesNotThrow(() => process.kill(orphan, 0), 'the orphan still runs');
  t.equal(s.code, 0);
  t.equal(s.files, 1);
  t.equal(s.pass, 1);
  // the orphan sleeps 300 s: the lane did not wait for it
  t.ok(Date.now() - started < 60_000, `ended in ${Date.now() - started} ms`);
  t.match(out.join(''), /still holds this lane's output/);
});

t.test('stopLanes ends a lane whose test file ignores SIGTERM: SIGKILL after the grace', async (t) => {
  rmSync(pidFile, { force: true });
  const lane = runLane('fix', [`${FIXTURES}/ignores-sigterm.ts`], ['--jobs=1'], {
    outputGraceMs: 500,
    write: () => {},
  });
  const file = await fixturePid();
  t.teardown(() => kill(file));
  stopLanes('SIGTERM', 1_000);
  const s = await lane;
  t.not(s.code, 0, 'a stopped lane does not pass');
  // killed; a zombie until its new parent reaps it
  const state = () => {
    try {
      return readFileSync(`/proc/${file}/stat`, 'utf8').split(') ')[1]?.[0];
    } catch {
      return 'gone';
    }
  };
  t.ok(['gone', 'Z'].includes(state() ?? ''), `the test file is gone (${state()})`);
});

t.test('a timed-out file says what held it open', async (t) => {
  const text = brief({ expired: 'x.test.ts', handles: [{ type: 'Socket', connected: true }] }, '  ');
  t.match(text, /expired: x\.test\.ts/);
  t.match(text, /handles:\n\s+- type: Socket/);
});
