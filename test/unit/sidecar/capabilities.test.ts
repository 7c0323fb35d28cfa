// Every capability module exports its factory under one name, createCapability, and no default.
import { globSync, readFileSync } from 'node:fs';
import t from 'tap';
import { CAPABILITIES } from '../../../sidecar/capabilities.ts';

const ROOT = new URL('../../../', import.meta.url).pathname;

t.test('each feature loads a factory', async (t) => {
  for (const [feature, load] of Object.entries(CAPABILITIES)) t.type(await load?.(), 'function', feature);
});

t.test('capability modules export createCapability and no default', async (t) => {
  const files = globSync('sidecar/*/capability.ts', { cwd: ROOT });
  t.ok(files.length >= 3, 'l2, lease and netfilter');
  for (const f of files) {
    const text = readFileSync(`${ROOT}${f}`, 'utf8');
    t.match(text, /^export const createCapability: CapabilityFactory = /m, f);
    t.notMatch(text, /^export default /m, f);
  }
});
