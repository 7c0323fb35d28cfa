// `make coverage`'s report: line coverage per product directory, from the coverage tap collected
// in the last `node scripts/test.ts --coverage` run (istanbul's json-summary, made by `tap report`).
// tap only knows files a test loaded; a product file no test loaded counts here with all its code
// lines uncovered, so a directory's figure is not flattered by what was never run.
//   node scripts/coverage.ts
import { spawnSync } from 'node:child_process';
import { globSync, readFileSync } from 'node:fs';

const ROOT = new URL('..', import.meta.url).pathname;
const DIRS = ['webhook', 'sidecar', 'shared', 'cli'];

const made = spawnSync(
  process.execPath,
  [`${ROOT}node_modules/tap/dist/esm/run.mjs`, 'report', 'json-summary', '--allow-incomplete-coverage'],
  {
    cwd: ROOT,
    encoding: 'utf8',
  },
);
if (made.status !== 0) {
  process.stderr.write(`tap report failed (run \`make coverage\`, which collects first):\n${made.stderr}\n`);
  process.exit(1);
}
type Lines = { total: number; covered: number };
const summary = JSON.parse(readFileSync(`${ROOT}.tap/report/coverage-summary.json`, 'utf8')) as Record<
  string,
  { lines: Lines }
>;

/** Lines a coverage tool would count in a file never loaded: not blank, not only a comment. */
function codeLines(file: string): number {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => {
      const s = l.trim();
      return s !== '' && !s.startsWith('//') && !s.startsWith('*') && !s.startsWith('/*');
    }).length;
}

const rows: string[][] = [['directory', 'lines covered', 'lines', '%', 'files never loaded']];
let all: Lines = { total: 0, covered: 0 };
for (const dir of DIRS) {
  const files = globSync(`${dir}/**/*.ts`, { cwd: ROOT }).filter((f) => !f.endsWith('.d.ts'));
  const sum: Lines = { total: 0, covered: 0 };
  let never = 0;
  for (const f of files) {
    const hit = summary[`${ROOT}${f}`];
    if (hit) {
      sum.total += hit.lines.total;
      sum.covered += hit.lines.covered;
    } else {
      never++;
      sum.total += codeLines(`${ROOT}${f}`);
    }
  }
  all = { total: all.total + sum.total, covered: all.covered + sum.covered };
  rows.push([`${dir}/`, String(sum.covered), String(sum.total), pct(sum), `${never} of ${files.length}`]);
}
rows.push(['all', String(all.covered), String(all.total), pct(all), '']);

function pct(l: Lines): string {
  return l.total === 0 ? '-' : ((100 * l.covered) / l.total).toFixed(1);
}
const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
for (const r of rows)
  process.stdout.write(
    `${r
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd()}\n`,
  );
