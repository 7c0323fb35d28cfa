// The demo report: a pure function from a recorded timeline to one self-contained HTML page
// with an SVG timeline chart (ARP owner lane, Lease holder lane, markers) and the tables.
import { arpValue, fmtMs, type Segment, segments, type Timeline } from './timeline.ts';

export const escapeHtml = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

// Fixed palette, assigned in node order so the same node has the same colour in both lanes.
const PALETTE = ['#4e79a7', '#59a14f', '#f28e2b', '#b07aa1', '#76b7b2', '#edc948'];
const NOBODY = '#e15759';
const SEVERAL = '#9c755f';

const W = 960;
const LEFT = 130;
const LANE_H = 34;

function colourOf(value: string, nodes: string[]): string {
  if (value === '') return NOBODY;
  if (value.includes('+')) return SEVERAL;
  const i = nodes.findIndex((n) => value === n || value.includes(n));
  return i >= 0 ? (PALETTE[i % PALETTE.length] as string) : '#bab0ac';
}

function lane(
  y: number,
  label: string,
  segs: Segment[],
  x: (t: number) => number,
  colour: (value: string) => string,
): string {
  const parts = [
    `<text x="${LEFT - 8}" y="${y + LANE_H / 2 + 4}" text-anchor="end">${escapeHtml(label)}</text>`,
  ];
  for (const s of segs) {
    const x0 = x(s.from);
    const w = Math.max(1, x(s.to) - x0);
    const name = s.value === '' ? 'nobody' : s.value;
    parts.push(
      `<rect x="${x0.toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${LANE_H}" fill="${colour(s.value)}"><title>${escapeHtml(`${name}: ${fmtMs(s.from)} – ${fmtMs(s.to)}`)}</title></rect>`,
    );
    if (w > 60)
      parts.push(
        `<text x="${(x0 + 4).toFixed(1)}" y="${y + LANE_H / 2 + 4}" fill="#fff">${escapeHtml(name)}</text>`,
      );
  }
  return parts.join('\n');
}

/** The SVG chart alone (exported for tests). */
export function renderChart(t: Timeline): string {
  // The chart starts at the first sample (the state before the drain), t=0 is the drain.
  const start = Math.min(0, ...t.arp.map((a) => a.t), ...t.lease.map((l) => l.t));
  const end = Math.max(t.endT, start + 1);
  const x = (ms: number) =>
    LEFT + ((Math.min(Math.max(ms, start), end) - start) / (end - start)) * (W - LEFT - 10);
  const arpSegs = segments(
    t.arp.map((a) => ({ t: a.t, value: arpValue(a) })),
    end,
  );
  const leaseSegs = segments(
    t.lease.map((l) => ({ t: l.t, value: l.holder })),
    end,
  );
  const marksTop = 20;
  const arpY = 40;
  const leaseY = arpY + LANE_H + 16;
  const actY = leaseY + LANE_H + 16;
  const byNode = (v: string) => colourOf(v, t.nodes);
  // A Lease holder is a pod: colour it by the node it runs on.
  const byHolderNode = (v: string) => colourOf(v === '' ? '' : (t.holderNodes?.[v] ?? v), t.nodes);
  const actions = t.events
    .filter((e) => e.t >= start && e.t <= end)
    .map(
      (e) =>
        `<circle cx="${x(e.t).toFixed(1)}" cy="${actY + 10}" r="5" fill="#333" fill-opacity="0.6"><title>${escapeHtml(`${fmtMs(e.t)} ${e.source}: ${e.text}`)}</title></circle>`,
    );
  const axisY = actY + 20 + 18;
  const H = axisY + 30;
  const ticks: string[] = [];
  const span = end - start;
  const step = span <= 10_000 ? 1000 : span <= 60_000 ? 5000 : 10_000;
  for (let ms = Math.ceil(start / step) * step; ms <= end; ms += step)
    ticks.push(
      `<line x1="${x(ms).toFixed(1)}" y1="${axisY - 4}" x2="${x(ms).toFixed(1)}" y2="${axisY}" stroke="#555"/><text x="${x(ms).toFixed(1)}" y="${axisY + 14}" text-anchor="middle">${ms / 1000}s</text>`,
    );
  const marks = t.marks.map(
    (m, i) =>
      `<line x1="${x(m.t).toFixed(1)}" y1="${marksTop}" x2="${x(m.t).toFixed(1)}" y2="${axisY}" stroke="#333" stroke-dasharray="4 3"/><text x="${(x(m.t) + 3).toFixed(1)}" y="${marksTop + (i % 2) * 11}">${escapeHtml(m.label)}</text>`,
  );
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-family="sans-serif" font-size="11">`,
    lane(arpY, 'ARP answered by', arpSegs, x, byNode),
    lane(leaseY, 'Lease holder', leaseSegs, x, byHolderNode),
    `<text x="${LEFT - 8}" y="${actY + 14}" text-anchor="end">seen in the API</text>`,
    ...actions,
    `<line x1="${LEFT}" y1="${axisY}" x2="${W - 10}" y2="${axisY}" stroke="#555"/>`,
    ...ticks,
    ...marks,
    '</svg>',
  ].join('\n');
}

export function renderReport(t: Timeline): string {
  const gapRows = t.gaps
    .map(
      (g) =>
        `<tr><td>${escapeHtml(g.name)}</td><td>${fmtMs(g.measuredMs)}</td><td>${escapeHtml(g.measuredFrom ?? '')}</td><td>${fmtMs(g.baselineMs)}</td><td>${escapeHtml(g.baselineNote)}</td></tr>`,
    )
    .join('\n');
  const eventRows = [...t.events]
    .sort((a, b) => a.t - b.t)
    .map(
      (e) =>
        `<tr><td>${(e.t / 1000).toFixed(2)} s</td><td>${escapeHtml(e.source)}</td><td>${escapeHtml(e.text)}</td></tr>`,
    )
    .join('\n');
  const componentRows = (t.components ?? [])
    .map(
      (c) =>
        `<tr><td>${escapeHtml(c.name)}</td><td>${c.real ? 'real' : 'simulated'}</td><td>${escapeHtml(c.note)}</td></tr>`,
    )
    .join('\n');
  const components = componentRows
    ? `<h2>What ran</h2>\n<table><tr><th>component</th><th>real or simulated</th><th>how</th></tr>\n${componentRows}\n</table>\n`
    : '';
  const legend = t.nodes
    .map((n) => `<span class="sw" style="background:${colourOf(n, t.nodes)}"></span>${escapeHtml(n)}`)
    .concat([
      `<span class="sw" style="background:${NOBODY}"></span>nobody`,
      `<span class="sw" style="background:${SEVERAL}"></span>several`,
    ])
    .join(' ');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(t.title)}</title>
<style>
body{font-family:sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
.sw{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}
</style></head><body>
<h1>${escapeHtml(t.title)}</h1>
<p>Started ${escapeHtml(t.startedAt)}. Times are from the start of the drain. Every sample was measured by the demo itself:
ARP probes for ${escapeHtml(t.vip)} sent from the client namespace (which node's MAC answered), and reads of the Lease
${escapeHtml(t.leaseName)} and of the Node/Pod objects through the API server. Resolution: one ARP round every
${t.probeIntervalMs ?? 50} ms (a shorter silence can go unseen), Lease reads every ${t.leaseIntervalMs ?? 100} ms, other objects every
${t.apiIntervalMs ?? 200} ms; a time is when the demo first saw the change. The "seen in" column of the last table names
where each row was read.</p>
${components}<h2>Timeline</h2>
${renderChart(t)}
<p>${legend}</p>
<h2>Gaps</h2>
<table><tr><th>gap</th><th>drainguard (measured)</th><th>measured from</th><th>baseline</th><th>baseline from</th></tr>
${gapRows}
</table>
<h2>What was observed</h2>
<table><tr><th>time</th><th>seen in</th><th>what</th></tr>
${eventRows}
</table>
</body></html>
`;
}
