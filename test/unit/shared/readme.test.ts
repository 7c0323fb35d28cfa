import { existsSync, readdirSync, readFileSync } from 'node:fs';
import t from 'tap';
import { configReference } from '../../../scripts/config-reference.ts';

t.test('the README configuration reference is the contract (node scripts/config-reference.ts)', async (t) => {
  const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
  const m = /<!-- config-reference:start -->\n([\s\S]*?)\n<!-- config-reference:end -->/.exec(readme);
  t.ok(m, 'README has the config-reference markers');
  if (!m) return;
  t.equal(m[1], configReference());
});

const root = new URL('../../../', import.meta.url);
const read = (rel: string) => readFileSync(new URL(rel, root), 'utf8');
const productTs = (dir: string): string[] =>
  readdirSync(new URL(dir, root), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `${dir}${f}`);

t.test('every metric the sidecar or the webhook exports is in the README’s metric list', async (t) => {
  const readme = read('README.md');
  const names = new Set<string>();
  for (const f of ['sidecar/', 'webhook/', 'shared/'].flatMap(productTs))
    for (const m of read(f).matchAll(/['"`](drainguard_[a-z0-9_]+)['"`]/g)) names.add(m[1] as string);
  t.ok(names.size >= 20, `metric names found in the code (${names.size})`);
  t.strictSame(
    [...names].filter((n) => !readme.includes(`\`${n}`)),
    [],
    'named in the README (drainguard_netfilter_held was missing)',
  );
});

t.test('links in the README and docs/ stay inside the repository and lead to a file', async (t) => {
  const docs = ['README.md', ...readdirSync(new URL('docs/', root)).map((f) => `docs/${f}`)].filter((f) =>
    f.endsWith('.md'),
  );
  const bad: string[] = [];
  for (const doc of docs)
    for (const m of read(doc).matchAll(/\]\(([^)\s#]+)(#[^)]*)?\)/g)) {
      const target = m[1] as string;
      if (/^[a-z]+:/.test(target)) continue;
      const url = new URL(target, new URL(doc, root));
      if (!url.href.startsWith(root.href)) bad.push(`${doc}: ${target} (outside the repository)`);
      else if (!existsSync(url)) bad.push(`${doc}: ${target} (no such file)`);
    }
  t.strictSame(bad, [], 'docs/demo.md linked ../../shared/docs/facts.md');
});
