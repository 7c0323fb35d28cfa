// `make demo` end to end: the real run (API server, webhook, sidecars in namespaces, simulators),
// judged by what it prints and writes, and by what it leaves behind — nothing, Ctrl-C included.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { sh } from '../../../lab/netns.ts';
import { waitFor } from '../../../shared/clock.ts';

const RUN = new URL('../../../demo/run.ts', import.meta.url).pathname;

function startDemo(): { child: ChildProcess; out: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [RUN], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, out: () => out, exited };
}

/** Namespaces (dgt<pid36>-…) and processes running in them that a demo process left behind. */
async function leftovers(pid: number): Promise<string[]> {
  const prefix = `dgt${pid.toString(36)}-`;
  const ns = (await sh(['ip', 'netns', 'list'])).stdout
    .split('\n')
    .map((l) => l.split(' ')[0] ?? '')
    .filter((n) => n.startsWith(prefix));
  const procs = (await sh(['pgrep', '-af', prefix])).stdout.split('\n').filter((l) => l.trim() !== '');
  return [...ns, ...procs];
}

interface Gap {
  name: string;
  measuredMs: number | null;
  baselineMs: number | null;
}

test('make demo: drains, measures against baselines, writes the report, leaves nothing behind', async () => {
  const demo = startDemo();
  const code = await demo.exited;
  const out = demo.out();
  assert.equal(code, 0, out.slice(-3000));
  const last = out.trim().split('\n').at(-1) ?? '';
  const m = /^report: (\/\S+\.html)$/.exec(last);
  assert.ok(m, `last line is "report: <absolute path>": ${last}`);
  const html = readFileSync(m[1] as string, 'utf8');
  assert.match(html, /<svg[\s>]/, 'the report has an SVG timeline chart');
  const timeline = JSON.parse(readFileSync(join(dirname(m[1] as string), 'timeline.json'), 'utf8')) as {
    gaps: Gap[];
  };
  const gap = (re: RegExp) => {
    const g = timeline.gaps.find((x) => re.test(x.name));
    assert.ok(g, `gap ${re} in the summary: ${timeline.gaps.map((x) => x.name).join('; ')}`);
    return g;
  };
  const dark = gap(/unanswered/);
  assert.ok(
    dark.measuredMs !== null && dark.measuredMs <= 1000,
    `VIP dark ${dark.measuredMs} ms with drainguard`,
  );
  assert.ok(dark.baselineMs !== null && dark.baselineMs > 2000, `baseline dark ${dark.baselineMs} ms`);
  const named = gap(/Lease names/);
  assert.ok(
    named.measuredMs !== null && named.baselineMs !== null && named.measuredMs * 4 < named.baselineMs,
  );
  assert.match(out, /drainguard\.io\/status/, 'the injection diff is shown');
  assert.deepEqual(await leftovers(demo.child.pid ?? 0), []);
});

test('make demo: Ctrl-C in the middle cleans up and prints no report', async () => {
  const demo = startDemo();
  await waitFor('the demo reaches its sidecars', () => demo.out().includes('== 4.'), {
    timeoutMs: 120_000,
    intervalMs: 100,
  });
  demo.child.kill('SIGINT');
  const code = await demo.exited;
  assert.notEqual(code, 0);
  assert.ok(!demo.out().includes('report: '), 'an interrupted run prints no report');
  await waitFor('nothing left behind', async () => (await leftovers(demo.child.pid ?? 0)).length === 0, {
    timeoutMs: 20_000,
    intervalMs: 200,
  });
});
