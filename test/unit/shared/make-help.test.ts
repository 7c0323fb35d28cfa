// `make help` is how a newcomer finds the targets: every target in the Makefile and mk/*.mk is in it.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import t from 'tap';

const ROOT = new URL('../../../', import.meta.url).pathname;

t.test('make help lists every target of the Makefile and mk/*.mk', async (t) => {
  const files = ['Makefile', ...readdirSync(`${ROOT}mk`).map((f) => `mk/${f}`)];
  const targets = new Set<string>();
  for (const f of files)
    for (const m of readFileSync(`${ROOT}${f}`, 'utf8').matchAll(/^([a-z][a-z0-9-]*):/gm))
      if (m[1] !== 'help') targets.add(m[1] as string);
  t.ok(targets.has('test') && targets.has('bench-api'), 'targets read from both places');
  const help = execFileSync('make', ['--no-print-directory', 'help'], { cwd: ROOT, encoding: 'utf8' });
  const listed = new Set([...help.matchAll(/^make ([a-z][a-z0-9-]*)\s/gm)].map((m) => m[1]));
  t.strictSame([...targets].filter((x) => !listed.has(x)).sort(), [], 'every target has a line in make help');
  t.strictSame(
    [...listed].filter((x) => x !== undefined && !targets.has(x)).sort(),
    [],
    'make help names no target that does not exist',
  );
});
