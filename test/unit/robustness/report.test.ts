// The robustness suite's report (test/robustness/report.ts): the table per fault kind, the replay
// of each violating trial, its HTML timeline in the demo's format, and the JSON last line.
import t from 'tap';
import type { TrialObservations } from '../../robustness/observations.ts';
import {
  faultTable,
  renderText,
  renderTrialHtml,
  replayCommand,
  summary,
  type TrialResult,
} from '../../robustness/report.ts';

const result = (trial: number, kinds: string[], over: Partial<TrialResult> = {}): TrialResult => ({
  plan: {
    seed: 7,
    trial,
    action: 'drain',
    subject: 'vip-owner',
    faults: kinds.map((k, i) => ({ kind: k as 'etcd-pause', atMs: 100 * i, durationMs: 1_000 })),
  },
  drained: true,
  darkMs: 300,
  dualMs: 0,
  violations: [],
  ...over,
});

const results = [
  result(0, ['etcd-pause']),
  result(1, ['etcd-pause', 'second-cordon'], {
    darkMs: 1_800,
    dualMs: 150,
    violations: [{ invariant: 'dark', t: 1_000, detail: '10.0.0.100 unanswered 1800 ms' }],
  }),
  result(2, ['second-cordon'], { drained: false }),
];

t.test('one row per fault kind and one for all trials', async (t) => {
  t.equal(
    faultTable(results),
    [
      'fault kind     trials  drains  longest dark (s)  longest dual (s)  violations',
      'etcd-pause     2       2       1.80              0.15              1',
      'second-cordon  2       1       1.80              0.15              1',
      'all trials     3       2       1.80              0.15              1',
    ].join('\n'),
  );
});

t.test('the last line is JSON with the fields the issue names; each violation has its replay', async (t) => {
  const text = renderText(7, results, (trial) => `/tmp/trial-${trial}.html`);
  const lines = text.trimEnd().split('\n');
  const last = JSON.parse(lines.at(-1) as string);
  t.match(last, {
    bench: 'robustness',
    seed: 7,
    trials: 3,
    fault_kinds: ['etcd-pause', 'second-cordon'],
    violations: 1,
    max_dark_s: 1.8,
    max_dual_s: 0.15,
    errors: 0,
    failed: [{ trial: 1, replay: 'make robustness SEED=7 TRIAL=1', invariants: ['dark'] }],
  });
  t.ok(lines.includes('trial 1: drain(vip-owner) + etcd-pause@0.0s/1.0s + second-cordon@0.1s/1.0s'));
  t.ok(lines.includes('  ✖ dark at 1.00 s: 10.0.0.100 unanswered 1800 ms'));
  t.ok(lines.includes(`  replay: ${replayCommand(7, 1)}`));
  t.equal(
    replayCommand(7, 1, 3),
    'make robustness CONTROL_PLANES=3 SEED=7 TRIAL=1',
    'an HA run replays on the HA lab',
  );
  t.match(summary(7, results, 3), { control_planes: 3, failed: [{ replay: /CONTROL_PLANES=3/ }] });
  t.notOk('control_planes' in summary(7, results));
  t.ok(lines.includes('  timeline: /tmp/trial-1.html'));
  t.notOk(text.includes('trial 0:'), 'clean trials are not listed');
});

t.test('a scripted trial replays by its name, not by a seed and trial number', async (t) => {
  const scripted = result(100, ['etcd-pause'], {
    violations: [{ invariant: 'dark', t: 1_000, detail: '10.0.0.100 unanswered 1800 ms' }],
  });
  scripted.plan.scripted = 'issue-42-item-10';
  const want = 'make robustness SCRIPTED=issue-42-item-10';
  t.ok(renderText(7, [scripted]).split('\n').includes(`  replay: ${want}`));
  t.match(summary(7, [scripted]), { failed: [{ trial: 100, replay: want }] });
});

t.test('a trial the runner could not carry out is listed as an error, not a violation', async (t) => {
  const r = [result(0, ['etcd-pause'], { error: 'no speaker pod on node-a' })];
  t.match(summary(7, r), { violations: 0, errors: 1, failed: [] });
  t.match(
    renderText(7, r),
    /! not carried out: no speaker pod on node-a\n {2}replay: make robustness SEED=7 TRIAL=0/,
  );
});

t.test(
  'a fault with nothing left to strike is counted as not injected, neither error nor violation',
  async (t) => {
    const r = [
      result(0, ['sidecar-sigkill'], {
        skipped: ['sidecar-sigkill: pod-x: its drainguard container is not running'],
      }),
    ];
    t.match(summary(7, r), { violations: 0, errors: 0, not_injected: 1 });
    t.match(
      renderText(7, r),
      /^ {2}– not injected: sidecar-sigkill: pod-x: its drainguard container is not running$/m,
    );
  },
);

t.test(
  'dark not counted because the VIP owner was blind is listed with its trial and counted in the JSON',
  async (t) => {
    const r = [
      result(0, ['api-path-drop', 'speaker-restart'], { blindOwnerMs: 9_000 }),
      result(1, ['etcd-pause']),
    ];
    t.match(summary(7, r), { violations: 0, blind_owner_trials: 1 });
    const text = renderText(7, r);
    t.match(text, /^trial 0: .*\n {2}○ dark not counted: 9\.00 s, the VIP's owner blind/m);
    t.notOk(text.includes('trial 1:'));
  },
);

t.test("a violating trial's timeline in the demo's HTML format", async (t) => {
  const o = {
    endT: 3_000,
    settledT: 2_500,
    arp: {
      '10.0.0.100': [
        { t: 0, nodes: ['node-a'] },
        { t: 1_000, nodes: [] },
        { t: 2_800, nodes: ['node-b'] },
      ],
    },
    fences: [{ node: 'node-a', t: 900 }],
    holders: [{ t: 0, holder: 'router-1' }],
    leaderEvents: [{ t: 10, identity: 'router-1', ev: 'leading' }],
    marks: [{ t: 0, label: 'drain' }],
  } as unknown as TrialObservations;
  const html = renderTrialHtml(results[1] as TrialResult, o, {
    nodes: ['node-a', 'node-b', 'node-c'],
    leaseName: 'site/skupper-site-leader',
    startedAt: '2026-11-24T16:00:00Z',
  });
  t.match(html, /<title>robustness seed 7 trial 1: drain\(vip-owner\) \+ etcd-pause/);
  t.match(html, /<svg/);
  t.match(html, /violation: dark/);
  t.match(html, /fence reported/);
  t.match(html, />settled</);
});
