import { readFileSync } from 'node:fs';
import t from 'tap';
import { configReference } from '../../../scripts/config-reference.ts';

t.test('the README configuration reference is the contract (node scripts/config-reference.ts)', async (t) => {
  const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
  const m = /<!-- config-reference:start -->\n([\s\S]*?)\n<!-- config-reference:end -->/.exec(readme);
  t.ok(m, 'README has the config-reference markers');
  if (!m) return;
  t.equal(m[1], configReference());
});
