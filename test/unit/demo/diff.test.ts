import assert from 'node:assert/strict';
import { test } from 'node:test';
import { podDiff, summarize } from '../../../demo/diff.ts';

test('pod diff keys containers by name and reports added, changed and removed leaves', () => {
  const before = {
    metadata: { name: 'p', labels: { a: '1' } },
    spec: { containers: [{ name: 'speaker', image: 'x' }], terminationGracePeriodSeconds: 2 },
  };
  const after = {
    metadata: { name: 'p', annotations: { s: '{}' } },
    spec: {
      containers: [
        { name: 'drainguard', image: 'dg', env: [{ name: 'A', value: '1' }] },
        { name: 'speaker', image: 'x', lifecycle: { preStop: { httpGet: { path: '/prestop' } } } },
      ],
      terminationGracePeriodSeconds: 30,
    },
  };
  const d = podDiff(before, after);
  assert.ok(d.some((l) => l.op === '+' && l.path === 'spec.containers[drainguard].image'));
  assert.ok(
    d.some((l) => l.op === '+' && l.path === 'spec.containers[speaker].lifecycle.preStop.httpGet.path'),
  );
  assert.ok(
    d.some((l) => l.op === '~' && l.path === 'spec.terminationGracePeriodSeconds' && l.value === '2 → 30'),
  );
  assert.ok(d.some((l) => l.op === '-' && l.path === 'metadata.labels.a'));
  assert.ok(!d.some((l) => l.path === 'spec.containers[speaker].image'));
  const s = summarize(d, 3);
  assert.equal(s.length, 4);
  assert.match(s[0] ?? '', /^\+ /);
  assert.match(s[3] ?? '', /more$/);
  assert.ok(summarize(d, 50).includes('+ spec.containers[drainguard] (4 fields)'));
  assert.deepEqual(podDiff(before, before), []);
});
