import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { configReference } from '../../../scripts/config-reference.ts';

test('the README configuration reference is the contract (node scripts/config-reference.ts)', () => {
  const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
  const m = /<!-- config-reference:start -->\n([\s\S]*?)\n<!-- config-reference:end -->/.exec(readme);
  assert.ok(m, 'README has the config-reference markers');
  assert.equal(m[1], configReference());
});
