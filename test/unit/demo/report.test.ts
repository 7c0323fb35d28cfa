import { readFileSync, writeFileSync } from 'node:fs';
import t from 'tap';
import { escapeHtml, renderChart, renderReport } from '../../../demo/report.ts';
import {
  firstAnsweredBy,
  firstRenewBy,
  lastAnsweredBy,
  leaseMovedAt,
  longestArpSilence,
  segments,
  summaryTable,
  type Timeline,
} from '../../../demo/timeline.ts';

const GOLDEN = new URL('../../golden/demo/report.html', import.meta.url);

const timeline = (): Timeline => ({
  title: 'drainguard demo <drain node-a>',
  startedAt: '2026-11-22T01:00:00.000Z',
  endT: 12_000,
  nodes: ['node-a', 'node-b', 'node-c'],
  vip: '198.51.100.100',
  leaseName: 'skupper/skupper-site-leader',
  holderNodes: { 'router-node-a': 'node-a', 'router-x': 'node-b' },
  components: [
    { name: 'kubelet', real: true, note: 'on containerd' },
    { name: 'MetalLB speaker', real: false, note: 'simulator <lab/sim>' },
  ],
  arp: [
    { t: 0, nodes: ['node-a'] },
    { t: 100, nodes: ['node-a'] },
    { t: 1800, nodes: ['node-a', 'node-b'] },
    { t: 1900, nodes: ['node-b'] },
    { t: 5000, nodes: ['node-b'] },
  ],
  lease: [
    { t: 0, holder: 'router-node-a' },
    { t: 3000, holder: 'router-node-b' },
  ],
  events: [
    {
      t: 2500,
      source: 'Event LeaseHandedOver',
      text: 'Lease skupper/skupper-site-leader handed to router-node-b',
    },
    { t: 200, source: 'Node node-a label', text: 'exclude label added & <annotated>' },
  ],
  marks: [{ t: 0, label: 'cordon node-a' }],
  gaps: [
    {
      name: 'ARP silence',
      measuredMs: 0,
      measuredFrom: 'ARP probes',
      baselineMs: 5000,
      baselineNote: 'memberlist failure detection',
    },
    { name: 'Lease without leader', measuredMs: 850, baselineMs: null, baselineNote: 'n/a' },
  ],
});

t.test('segments collapse equal neighbours and run to the end', async (t) => {
  t.strictSame(
    segments(
      [
        { t: 0, value: 'a' },
        { t: 10, value: 'a' },
        { t: 20, value: '' },
        { t: 30, value: 'b' },
      ],
      50,
    ),
    [
      { from: 0, to: 20, value: 'a' },
      { from: 20, to: 30, value: '' },
      { from: 30, to: 50, value: 'b' },
    ],
  );
  t.strictSame(segments([], 10), []);
});

t.test('gap measurements from probe rounds and lease reads', async (t) => {
  const arp = [
    { t: 0, nodes: ['a'] },
    { t: 100, nodes: [] },
    { t: 250, nodes: [] },
    { t: 400, nodes: ['b'] },
    { t: 500, nodes: [] },
    { t: 550, nodes: ['b'] },
  ];
  t.equal(longestArpSilence(arp, 0, 1000), 300);
  t.equal(longestArpSilence(arp, 420, 1000), 50);
  t.equal(longestArpSilence([{ t: 0, nodes: ['a'] }], 0, 1000), 0);
  t.equal(firstAnsweredBy(arp, 'b', 0), 400);
  t.equal(firstAnsweredBy(arp, 'c', 0), null);
  t.equal(lastAnsweredBy(arp, 'a', 0), 0);
  const lease = [
    { t: 0, holder: 'x' },
    { t: 10, holder: '' },
    { t: 20, holder: 'y' },
  ];
  t.equal(leaseMovedAt(lease, 'x', 0), 20);
  t.equal(leaseMovedAt(lease, 'y', 0), 0);
  t.equal(leaseMovedAt([{ t: 0, holder: 'x' }], 'x', 0), null);
  const renewed = [
    { t: 0, holder: 'x', renewTime: 'r0' },
    { t: 10, holder: 'y', renewTime: 'r1' },
    { t: 20, holder: 'y', renewTime: 'r1' },
    { t: 30, holder: 'y', renewTime: 'r2' },
  ];
  t.equal(firstRenewBy(renewed, 'y', 0), 30);
  t.equal(firstRenewBy(renewed, 'y', 0, true), 10);
  t.equal(firstRenewBy(renewed.slice(0, 3), 'y', 0), null);
  t.equal(firstRenewBy(renewed, 'z', 0), null);
});

t.test('escapes everything that comes from the cluster', async (t) => {
  t.equal(escapeHtml('<a href="x">&</a>'), '&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;');
  const html = renderReport(timeline());
  t.ok(!html.includes('<drain node-a>'));
  t.ok(html.includes('&lt;drain node-a&gt;'));
  t.ok(html.includes('exclude label added &amp; &lt;annotated&gt;'));
});

t.test('the chart has one rect per run in each lane, nobody in red, and the markers', async (t) => {
  const svg = renderChart(timeline());
  t.match(svg, /^<svg /);
  // ARP: a, a+b, b ; Lease: router-node-a, router-node-b
  t.equal((svg.match(/<rect /g) ?? []).length, 5);
  t.ok(svg.includes('node-a+node-b'));
  t.ok(svg.includes('cordon node-a'));
  const silent = renderChart({ ...timeline(), arp: [{ t: 0, nodes: [] }] });
  t.ok(silent.includes('fill="#e15759"'));
  // Every observed action is a dot with its text as tooltip.
  t.equal((svg.match(/<circle /g) ?? []).length, 2);
  t.ok(svg.includes('Event LeaseHandedOver: Lease skupper/skupper-site-leader handed to router-node-b'));
});

t.test('Lease holders take the colour of their node', async (t) => {
  const tl = timeline();
  const svg = renderChart({ ...tl, lease: [{ t: 0, holder: 'router-x' }] });
  const rects = [...svg.matchAll(/<rect [^>]*fill="(#[0-9a-f]+)"><title>([^<]*)</g)];
  const nodeB = rects.find((r) => r[2]?.startsWith('node-b:'))?.[1];
  const holder = rects.find((r) => r[2]?.startsWith('router-x:'))?.[1];
  t.ok(nodeB);
  t.equal(holder, nodeB);
});

t.test('the chart starts at the first sample before the drain, with t=0 inside it', async (t) => {
  const tl = timeline();
  const svg = renderChart({ ...tl, endT: 6000, arp: [{ t: -2000, nodes: ['node-a'] }, ...tl.arp] });
  t.ok(svg.includes('>-2s<'));
  t.ok(svg.includes('>0s<'));
  // The pre-drain run starts at the left edge of the plot and is not squeezed to a sliver.
  const first = /<rect x="([\d.]+)" y="\d+" width="([\d.]+)"/.exec(svg);
  t.equal(Number(first?.[1]), 130);
  t.ok(Number(first?.[2]) > 100);
});

t.test(
  'the report names every component as real or simulated, and what each gap was measured from',
  async (t) => {
    const html = renderReport(timeline());
    t.match(html, /<td>kubelet<\/td><td>real<\/td><td>on containerd<\/td>/);
    t.match(html, /<td>MetalLB speaker<\/td><td>simulated<\/td><td>simulator &lt;lab\/sim&gt;<\/td>/);
    t.match(html, /<td>ARP silence<\/td><td>0 ms<\/td><td>ARP probes<\/td>/);
    t.notMatch(renderReport({ ...timeline(), components: [] }), /What ran/);
  },
);

t.test('events are listed in time order', async (t) => {
  const html = renderReport(timeline()).split('<h2>What was observed</h2>')[1] ?? '';
  t.ok(html.includes('handed to router-node-b'));
  t.ok(html.indexOf('exclude label added') < html.indexOf('handed to router-node-b'));
});

t.test('report matches the golden file (UPDATE_GOLDEN=1 rewrites it)', async (t) => {
  const html = renderReport(timeline());
  if (process.env.UPDATE_GOLDEN) writeFileSync(GOLDEN, html);
  t.equal(html, readFileSync(GOLDEN, 'utf8'));
});

t.test('summary table aligns columns and shows missing values as a dash', async (t) => {
  const s = summaryTable(timeline().gaps);
  const lines = s.split('\n');
  t.equal(lines.length, 3);
  t.match(lines[2] ?? '', /^Lease without leader\s+850 ms\s+—\s+n\/a$/);
  t.match(lines[1] ?? '', /5\.0 s/);
});
