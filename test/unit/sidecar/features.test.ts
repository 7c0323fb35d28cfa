// Every feature module exports its factory under one name, createFeature, and no default.
import { globSync, readFileSync } from 'node:fs';
import t from 'tap';
import { FEATURE_MODULES } from '../../../sidecar/features.ts';

const ROOT = new URL('../../../', import.meta.url).pathname;

t.test('each feature loads a factory', async (t) => {
  for (const [feature, load] of Object.entries(FEATURE_MODULES)) t.type(await load?.(), 'function', feature);
});

t.test('feature modules export createFeature and no default', async (t) => {
  const files = globSync('sidecar/*/feature.ts', { cwd: ROOT });
  t.ok(files.length >= 3, 'l2, lease and netfilter');
  for (const f of files) {
    const text = readFileSync(`${ROOT}${f}`, 'utf8');
    t.match(text, /^export const createFeature: FeatureFactory = /m, f);
    t.notMatch(text, /^export default /m, f);
  }
});
