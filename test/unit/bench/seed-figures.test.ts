// make bench-seed's figures (test/bench/seed/figures.ts) from hand-made ARP rounds and API reads.
import t from 'tap';
import { seedFigures } from '../../bench/seed/figures.ts';

const A = 'aa:aa:aa:aa:aa:aa';
const B = 'bb:bb:bb:bb:bb:bb';
const rounds = (spec: string[][], start = 1000, step = 50) =>
  spec.map((macs, i) => ({ t: start + i * step, macs }));

t.test('dark, dual and silenced from ARP rounds in the window', async (t) => {
  const f = seedFigures({
    rounds: rounds([[A], [A], [A, B], [], [], [B], [B]]),
    reads: [],
    intervalMs: 50,
    from: 1000,
    to: 1300,
    drainedMac: A,
  });
  t.equal(f.dark_s, 0.1);
  t.equal(f.dual_s, 0.05);
  t.equal(f.silenced_s, 0.1, 'the last round with A is at +100 ms');
  t.same(f.owners, [
    [0, [A]],
    [0.1, [A, B]],
    [0.15, []],
    [0.25, [B]],
  ]);
});

t.test('silenced is null when the drained node never answered in the window', async (t) => {
  const f = seedFigures({
    rounds: rounds([[B]]),
    reads: [],
    intervalMs: 50,
    from: 1000,
    to: 2000,
    drainedMac: A,
  });
  t.equal(f.silenced_s, null);
});

t.test(
  'api_unavailable is the longest stretch between 200s by answer time, to the window edges',
  async (t) => {
    const f = seedFigures({
      rounds: [],
      reads: [
        { t: 1000, ms: 100, code: 200, unschedulable: false },
        { t: 1100, ms: 5000, code: 0 },
        { t: 1200, ms: 50, code: 200 },
        { t: 1300, ms: 20, code: 500 },
        { t: 3000, ms: 100, code: 200, unschedulable: true },
      ],
      intervalMs: 100,
      from: 1000,
      to: 4000,
      drainedMac: A,
      removedAt: 1250,
    });
    t.equal(f.api_unavailable_s, 1.85, '1250 → 3100');
    t.equal(f.api_back_s, 1.85, 'the first 200 sent after the removal (1250) is answered at 3100');
    t.equal(f.drain_seen_s, 2.1, 'the first 200 showing unschedulable, answered at 3100');
  },
);

t.test('no 200 at all: the whole window is unavailable, the drain never seen', async (t) => {
  const f = seedFigures({
    rounds: [],
    reads: [{ t: 1000, ms: 10, code: 0 }],
    intervalMs: 100,
    from: 1000,
    to: 3500,
    drainedMac: A,
  });
  t.equal(f.api_unavailable_s, 2.5);
  t.equal(f.drain_seen_s, null);
});

t.test('cluster_api_unavailable: the same measure of the direct reads of a node that stays', async (t) => {
  const reads = [
    { t: 1000, ms: 10, code: 200 },
    { t: 1100, ms: 1500, code: 500 },
    { t: 2700, ms: 20, code: 200 },
  ];
  const f = seedFigures({
    rounds: [],
    reads: [{ t: 1000, ms: 10, code: 200 }],
    directReads: reads,
    intervalMs: 100,
    from: 1000,
    to: 3000,
    drainedMac: A,
  });
  t.equal(f.cluster_api_unavailable_s, 1.71, '1010 → 2720: an election no route could avoid');
  t.equal(f.api_unavailable_s, 1.99, 'through the VIP: 1010 → the window end');
  t.equal(
    seedFigures({ rounds: [], reads: [], intervalMs: 100, from: 0, to: 1, drainedMac: A })
      .cluster_api_unavailable_s,
    null,
  );
});
