// The robustness suite's invariants (test/robustness/checks.ts) over hand-made histories: each
// checker passes a clean one and catches its violation.
import t from 'tap';
import { leftoversOf } from '../../../lab/cluster/leftovers.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION, LABEL_OWNED_ANNOTATION } from '../../../shared/names.ts';
import {
  blindOwnerMs,
  checkAll,
  checkDark,
  checkDual,
  checkExits,
  checkLeftovers,
  checkLiveRules,
  checkSettled,
  checkSplitBrain,
  checkTokens,
  eligibleMs,
  trialFigures,
} from '../../robustness/checks.ts';
import { type ArpRound, fencesAsCounted, type TrialObservations } from '../../robustness/observations.ts';

const VIP = '10.0.0.100';
/** Rounds every 50 ms from t=0: each entry is who answered. */
const rounds = (spec: string[][], step = 50): ArpRound[] => spec.map((nodes, i) => ({ t: i * step, nodes }));
const times = (n: number, nodes: string[]) => [...Array(n)].map(() => nodes);

/** A clean drain of node-a: A answers, 10 silent rounds (0.5 s), B answers; A fenced at 0.6 s. */
function clean(): TrialObservations {
  const arp = rounds([...times(20, ['node-a']), ...times(10, []), ...times(40, ['node-b'])]);
  return {
    endT: 3_500,
    settledT: 3_000,
    arp: { [VIP]: arp },
    eligible: [{ t: 0, nodes: ['node-b', 'node-c'] }],
    fences: [{ node: 'node-a', t: 1_600, liftedT: 3_000 }],
    holders: [
      { t: 0, holder: 'router-1' },
      { t: 1_200, holder: 'router-2' },
    ],
    leaderEvents: [
      { t: -5_000, identity: 'router-1', ev: 'leading' },
      { t: 1_100, identity: 'router-1', ev: 'stopped-leading' },
      { t: 1_300, identity: 'router-2', ev: 'leading' },
    ],
    renewDeadlineMs: 10_000,
    netfilter: [
      { pod: 'live', live: true, before: ['h1', 'h2'], after: ['h1', 'h2'] },
      { pod: 'stale', live: false, before: ['h3'], after: [] },
    ],
    leftovers: [
      { node: 'node-a', what: [] },
      { node: 'node-b', what: [] },
    ],
    settledArp: { [VIP]: rounds(times(6, ['node-a'])) },
    containers: [
      { pod: 'speaker-x', container: 'drainguard', sidecar: true, restartsBefore: 0, restartsAfter: 0 },
      { pod: 'speaker-x', container: 'speaker', sidecar: false, restartsBefore: 1, restartsAfter: 2 },
    ],
    injectedRestarts: ['speaker-x/speaker'],
    logs: [{ source: 'speaker-x/drainguard', line: 'Authorization: Bearer <redacted>' }],
    tokens: ['eyJhbGciOiJSUzI1NiIsImtpZCI6IkFCQyJ9.payload.sig'],
    marks: [{ t: 0, label: 'drain' }],
  };
}

t.test('a clean history passes every invariant', async (t) => {
  t.same(checkAll(clean()), []);
  t.same(trialFigures(clean()), { darkMs: 500, dualMs: 0 });
});

t.test('dark: a silence over 1 s while a node could serve; not while none could', async (t) => {
  const o = clean();
  o.arp[VIP] = rounds([...times(20, ['node-a']), ...times(25, []), ...times(10, ['node-b'])]);
  const v = checkDark(o);
  t.equal(v.length, 1);
  t.match(v[0], { invariant: 'dark', t: 1_000, detail: /1250 ms/ });
  // 1.25 s dark, but for 0.5 s of it no node was eligible: 0.75 s counts.
  o.eligible = [
    { t: 0, nodes: ['node-b'] },
    { t: 1_200, nodes: [] },
    { t: 1_700, nodes: ['node-b'] },
  ];
  t.same(checkDark(o), []);
  t.equal(eligibleMs(1_000, 2_250, o.eligible), 750);
  t.equal(eligibleMs(0, 100, []), 100, 'unknown eligibility counts as servable');
  // Dark until the end of the record: still a window.
  o.eligible = [{ t: 0, nodes: ['node-b'] }];
  o.arp[VIP] = rounds([...times(2, ['node-a']), ...times(30, [])]);
  o.endT = 1_600;
  t.match(checkDark(o), [{ invariant: 'dark', detail: /1500 ms/ }]);
});

t.test(
  'dark: a blind VIP owner (its speaker stopped while its path to the API was cut) is not counted, within its bound only',
  async (t) => {
    // SEED=111 TRIAL=128: node-a answers until 1.0 s, its speaker is killed at 0.95 s while its
    // path to the API is cut; dark until node-b answers at 9.0 s.
    const blind = () => {
      const o = clean();
      o.arp[VIP] = rounds([...times(20, ['node-a']), ...times(160, []), ...times(20, ['node-b'])]);
      o.endT = 10_000;
      o.speakerStops = [{ node: 'node-a', t: 950 }];
      o.apiCuts = [{ node: 'node-a', from: 0, to: 8_500 }];
      return o;
    };
    t.same(checkDark(blind()), [], 'dark while blind, and until a second after the path came back');
    t.equal(blindOwnerMs(blind()), 8_000);

    const cutShort = blind();
    cutShort.apiCuts = [{ node: 'node-a', from: 0, to: 5_000 }];
    t.match(
      checkDark(cutShort),
      [{ invariant: 'dark', detail: /unanswered 3000 ms .*5000 ms more not counted: its owner blind/ }],
      'the path back at 5 s: the 3 s after its second count',
    );

    const noCut = blind();
    noCut.apiCuts = [];
    t.match(checkDark(noCut), [{ detail: /unanswered 8000 ms/ }], 'a speaker restart alone is no excuse');
    t.equal(blindOwnerMs(noCut), 0);

    const otherNode = blind();
    otherNode.apiCuts = [{ node: 'node-b', from: 0, to: 8_500 }];
    t.match(checkDark(otherNode), [{ detail: /unanswered 8000 ms/ }], "another node's cut is no excuse");

    const cutAfter = blind();
    cutAfter.apiCuts = [{ node: 'node-a', from: 2_000, to: 8_500 }];
    t.match(checkDark(cutAfter), [{ detail: /unanswered 8000 ms/ }], 'a cut after the restart is no excuse');

    const long = blind();
    long.arp[VIP] = rounds([...times(20, ['node-a']), ...times(380, []), ...times(20, ['node-b'])]);
    long.endT = 21_000;
    long.apiCuts = [{ node: 'node-a', from: 0, to: 30_000 }];
    t.match(
      checkDark(long),
      [{ detail: /unanswered 5050 ms .*13950 ms more not counted/ }],
      'past BLIND_OWNER_BOUND_MS (the fail-safe and memberlist) it counts again',
    );
  },
);

t.test('dual: two nodes over 0.1 s after the fence was reported; before it, no violation', async (t) => {
  const o = clean();
  // A and B answer together from 1.0 s to 2.0 s; A's fence reported at 1.6 s.
  o.arp[VIP] = rounds([
    ...times(20, ['node-a']),
    ...times(20, ['node-a', 'node-b']),
    ...times(20, ['node-b']),
  ]);
  const v = checkDual(o);
  t.equal(v.length, 1);
  t.match(v[0], { invariant: 'dual', t: 1_600, detail: /node-a and node-b for 400 ms/ });
  t.equal(trialFigures(o).dualMs, 1_000, 'the figure is the whole dual window');
  o.fences = [{ node: 'node-a', t: 1_950 }];
  t.same(checkDual(o), [], '50 ms after the fence: within the limit');
  o.fences = [{ node: 'node-a', t: 100, liftedT: 900 }];
  t.same(checkDual(o), [], 'a fence lifted before the dual window does not count');
});

t.test(
  'the runner uncordoning a node lifts its fence as counted; the poll may report it later',
  async (t) => {
    // SEED=108 TRIAL=89, as data: node-c drained, fenced (reported at 2.09 s), node-b the owner;
    // the settle uncordoned node-c at 32.75 s, its sidecar lifted fence and label at 32.95 s, and
    // node-c's speaker answered beside node-b until node-b saw the label go (the handback, 102 ms).
    // The poll saw the report go only at 33.2 s.
    const o = clean();
    o.arp[VIP] = rounds([
      ...times(30, ['node-c']),
      ...times(629, ['node-b']),
      ...times(3, ['node-b', 'node-c']),
      ...times(40, ['node-c']),
    ]);
    o.endT = 35_100;
    o.settledT = 32_750;
    const polled = [{ node: 'node-c', t: 2_090, liftedT: 33_200 }];
    o.fences = fencesAsCounted(polled, []);
    t.match(
      checkDual(o),
      [{ invariant: 'dual', detail: /node-b and node-c for 150 ms/ }],
      'counted before the fix',
    );
    o.fences = fencesAsCounted(polled, [
      { node: 'node-a', t: 32_750 },
      { node: 'node-c', t: 32_750 },
    ]);
    t.same(o.fences, [{ node: 'node-c', t: 2_090, liftedT: 32_750 }], 'lifted at the uncordon');
    t.same(checkDual(o), []);
    t.same(
      fencesAsCounted(polled, [{ node: 'node-c', t: 1_000 }]),
      polled,
      'an uncordon before the fence was reported lifts nothing',
    );
    t.same(
      fencesAsCounted([{ node: 'node-c', t: 2_090 }], [{ node: 'node-c', t: 5_000 }]),
      [{ node: 'node-c', t: 2_090, liftedT: 5_000 }],
      'a fence the poll never saw go',
    );
    // A dual answer while the fence still stands (before the uncordon) is still a violation.
    o.arp[VIP] = rounds([
      ...times(30, ['node-c']),
      ...times(300, ['node-b']),
      ...times(5, ['node-b', 'node-c']),
    ]);
    o.arp[VIP].push(...rounds(times(40, ['node-b'])).map((r) => ({ ...r, t: r.t + 16_750 })));
    t.match(checkDual(o), [{ invariant: 'dual', t: 16_500, detail: /for 250 ms/ }]);
  },
);

t.test(
  'split brain: two acting leaders beyond RenewDeadline; a container exit ends leader work',
  async (t) => {
    const o = clean();
    o.leaderEvents = [
      { t: 0, identity: 'router-1', ev: 'leading' },
      { t: 1_000, identity: 'router-2', ev: 'leading' },
      { t: 12_000, identity: 'router-1', ev: 'stopped-leading' },
    ];
    o.endT = 20_000;
    t.match(checkSplitBrain(o), [{ invariant: 'split-brain', t: 1_000, detail: /11000 ms/ }]);
    o.leaderEvents[2] = { t: 5_000, identity: 'router-1', ev: 'exited' };
    t.same(checkSplitBrain(o), [], '4 s of overlap is within RenewDeadline');
    // Never stopped: open until the end of the record.
    o.leaderEvents = o.leaderEvents.slice(0, 2);
    t.equal(checkSplitBrain(o).length, 1);
  },
);

t.test("live rules: a live pod's deleted rule is caught, a stale pod's is not", async (t) => {
  const o = clean();
  o.netfilter[0] = { pod: 'live', live: true, before: ['h1', 'h2'], after: ['h2'] };
  t.match(checkLiveRules(o), [
    { invariant: 'live-rule-deleted', detail: /live pod live lost 1 rule\(s\): h1/ },
  ]);
});

t.test('left behind: anything drainguard leaves on a node after the settle', async (t) => {
  t.same(leftoversOf({ name: 'n', labels: {}, annotations: {}, fenceTables: [] }), []);
  t.same(
    leftoversOf({
      name: 'n',
      labels: {},
      annotations: { [L2_STATE_ANNOTATION]: JSON.stringify({ phase: 'idle', fenced: false }) },
      fenceTables: [],
    }),
    [],
    'an idle L2 state is no leftover',
  );
  const what = leftoversOf({
    name: 'n',
    labels: { [EXCLUDE_LABEL]: '' },
    annotations: {
      [LABEL_OWNED_ANNOTATION]: 'true',
      [L2_STATE_ANNOTATION]: JSON.stringify({ phase: 'fenced', fenced: true, memberlistCut: true }),
    },
    fenceTables: ['netdev', 'api'],
  });
  t.same(what, [
    `label ${EXCLUDE_LABEL}`,
    `annotation ${LABEL_OWNED_ANNOTATION}`,
    'nft table netdev drainguard (fence)',
    'nft table inet drainguard-api (stale API server fence)',
    'L2 state phase fenced',
    'L2 state fenced',
    'memberlist cut',
  ]);
  const o = clean();
  o.leftovers[1] = { node: 'node-b', what };
  t.match(checkLeftovers(o), [{ invariant: 'left-behind', t: 3_000, detail: /^node-b: label/ }]);
});

t.test('after the settle: exactly one node answers every round', async (t) => {
  const o = clean();
  o.settledArp[VIP] = rounds([['node-a'], ['node-a'], ['node-a', 'node-c']]);
  t.match(checkSettled(o), [{ invariant: 'not-single-after-settle', detail: /1 of 3 rounds/ }]);
  o.settledArp[VIP] = rounds([['node-a'], ['node-b']]);
  t.match(checkSettled(o), [{ detail: /node-a, node-b/ }], 'two nodes taking turns');
  o.settledArp[VIP] = rounds([[], []]);
  t.match(checkSettled(o), [{ detail: /by nobody/ }]);
  o.settledArp[VIP] = [];
  t.match(checkSettled(o), [{ detail: /no probe round/ }]);
});

t.test('exits: a restart the nemesis did not cause is caught, sidecar or not', async (t) => {
  const o = clean();
  o.containers.push(
    {
      pod: 'router-1',
      container: 'drainguard',
      sidecar: true,
      restartsBefore: 0,
      restartsAfter: 1,
      lastExit: { reason: 'Error', exitCode: 1 },
    },
    { pod: 'router-1', container: 'router', sidecar: false, restartsBefore: 0, restartsAfter: 1 },
  );
  t.match(checkExits(o), [
    {
      invariant: 'sidecar-exit',
      detail: 'router-1/drainguard restarted 1 time(s) (last: Error, exit code 1)',
    },
    { invariant: 'container-restart', detail: 'router-1/router restarted 1 time(s)' },
  ]);
  o.injectedRestarts.push('router-1/drainguard', 'router-1/router');
  t.same(checkExits(o), []);
});

t.test('tokens: a log line carrying a token is caught, and the report does not quote it', async (t) => {
  const o = clean();
  const token = o.tokens[0] as string;
  o.logs.push({ source: 'router-1/drainguard', line: `GET /api with Bearer ${token}` });
  const v = checkTokens(o);
  t.match(v, [{ invariant: 'token-logged', detail: 'router-1/drainguard logged a token (line 2 recorded)' }]);
  t.notOk(JSON.stringify(v).includes(token));
  o.tokens = ['short'];
  o.logs.push({ source: 'x', line: 'a short word' });
  t.same(checkTokens(o), [], 'strings under 16 characters are not tokens');
});
