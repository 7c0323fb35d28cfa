import t from 'tap';
import { podDiff, summarize } from '../../../demo/diff.ts';

t.test('pod diff keys containers by name and reports added, changed and removed leaves', async (t) => {
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
  t.ok(d.some((l) => l.op === '+' && l.path === 'spec.containers[drainguard].image'));
  t.ok(d.some((l) => l.op === '+' && l.path === 'spec.containers[speaker].lifecycle.preStop.httpGet.path'));
  t.ok(
    d.some((l) => l.op === '~' && l.path === 'spec.terminationGracePeriodSeconds' && l.value === '2 → 30'),
  );
  t.ok(d.some((l) => l.op === '-' && l.path === 'metadata.labels.a'));
  t.ok(!d.some((l) => l.path === 'spec.containers[speaker].image'));
  const s = summarize(d, 3);
  t.equal(s.length, 4);
  t.match(s[0] ?? '', /^\+ /);
  t.match(s[3] ?? '', /more$/);
  t.ok(summarize(d, 50).includes('+ spec.containers[drainguard] (4 fields)'));
  t.strictSame(podDiff(before, before), []);
});
