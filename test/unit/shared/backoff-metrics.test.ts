import t from 'tap';
import { Backoff } from '../../../shared/backoff.ts';
import { microTime } from '../../../shared/kube/types.ts';
import { Registry } from '../../../shared/metrics.ts';

t.test('backoff grows exponentially within [half, full], is capped, and resets', async (t) => {
  const lo = new Backoff({ baseMs: 100, capMs: 1000, random: () => 0 });
  const hi = new Backoff({ baseMs: 100, capMs: 1000, random: () => 1 });
  t.strictSame(
    [1, 2, 3, 4, 5, 6].map(() => lo.next()),
    [50, 100, 200, 400, 500, 500],
  );
  t.strictSame(
    [1, 2, 3, 4, 5, 6].map(() => hi.next()),
    [100, 200, 400, 800, 1000, 1000],
  );
  hi.reset();
  t.equal(hi.next(), 100);
});

t.test('metrics render Prometheus text with escaped labels and histogram buckets', async (t) => {
  const r = new Registry();
  const c = r.counter('drainguard_things_total', 'Things.');
  c.inc({ kind: 'a"b' });
  c.inc({ kind: 'a"b' }, 2);
  const h = r.histogram('drainguard_latency_seconds', 'Latency.', [0.1, 1]);
  h.observe({}, 0.05);
  h.observe({}, 0.5);
  const text = r.render();
  t.match(text, /drainguard_things_total\{kind="a\\"b"\} 3/);
  t.match(text, /drainguard_latency_seconds_bucket\{le="0.1"\} 1/);
  t.match(text, /drainguard_latency_seconds_bucket\{le="1"\} 2/);
  t.match(text, /drainguard_latency_seconds_bucket\{le="\+Inf"\} 2/);
  t.match(text, /drainguard_latency_seconds_count 2/);
  t.throws(() => r.counter('other_total', 'x'), /must match drainguard_/);
});

t.test('counters and gauges render HELP, TYPE and one line per label set', async (t) => {
  const r = new Registry();
  r.counter('drainguard_idle_total', 'Never counted.');
  const g = r.gauge('drainguard_level', 'A level.');
  g.set({}, 2);
  g.set({ b: '2', a: '1' }, 0.5);
  t.equal(g.get({ a: '1', b: '2' }), 0.5);
  t.equal(g.get({ a: 'other' }), undefined);
  t.equal(r.counter('drainguard_idle_total', 'Never counted.').get(), 0);
  t.equal(
    r.render(),
    [
      '# HELP drainguard_idle_total Never counted.',
      '# TYPE drainguard_idle_total counter',
      '# HELP drainguard_level A level.',
      '# TYPE drainguard_level gauge',
      'drainguard_level 2',
      'drainguard_level{a="1",b="2"} 0.5',
      '',
    ].join('\n'),
  );
});

t.test('MicroTime has six fractional digits', async (t) => {
  t.equal(microTime(Date.UTC(2026, 0, 2, 3, 4, 5, 678)), '2026-01-02T03:04:05.678000Z');
});
