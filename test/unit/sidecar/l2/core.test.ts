import t, { type Test } from 'tap';
import { parseL2State } from '../../../../shared/l2-state.ts';
import {
  initialMemory,
  type L2Action,
  type L2Memory,
  type L2Observation,
  type L2Settings,
  needsTick,
  REJOIN_MS,
  RELABEL_MAX_MS,
  SPEAKER_CATCH_UP_MAX_MS,
  settled,
  someOf,
  staleServerCheckDue,
  statusOf,
  statusReadDue,
  step,
} from '../../../../sidecar/l2/handover/index.ts';
import { resume } from '../../../../sidecar/l2/handover/resume.ts';

const cfg: L2Settings = {
  handoverBudgetMs: 30_000,
  settleMs: 10_000,
  failsafeGraceMs: 5_000,
  memberlistPorts: [7946],
  nodeName: 'node-a',
};
const T0 = 1_700_000_000_000;
const svc = { service: 'web/www', ips: ['192.0.2.10'] };

function obs(over: Partial<L2Observation> = {}): L2Observation {
  return {
    now: T0,
    draining: false,
    terminating: false,
    drainReason: undefined,
    synced: true,
    apiDownSince: undefined,
    excludeLabel: false,
    labelOwned: false,
    statusSource: 'servicel2status',
    announced: [svc],
    newOwners: {},
    otherCandidates: ['node-b', 'node-c'],
    interfaces: ['eth0'],
    fence: undefined,
    ...over,
  };
}

/** Drives the core like the edge does: actions take effect in the next observation. */
class World {
  memory: L2Memory = initialMemory(T0);
  o: L2Observation;
  log: L2Action[][] = [];
  constructor(o: L2Observation) {
    this.o = o;
  }
  /** What the Node annotation would say now. */
  get status() {
    return statusOf(this.memory, false);
  }
  run(over: Partial<L2Observation> = {}): L2Action[] {
    this.o = { ...this.o, ...over };
    const { memory, actions } = step(this.memory, this.o, cfg);
    this.memory = memory;
    for (const a of actions) {
      if (a.kind === 'label') this.o = { ...this.o, excludeLabel: true, labelOwned: true };
      if (a.kind === 'unlabel') this.o = { ...this.o, excludeLabel: false, labelOwned: false };
      if (a.kind === 'fence') this.o = { ...this.o, fence: a.spec };
      if (a.kind === 'unfence') this.o = { ...this.o, fence: undefined };
    }
    this.log.push(actions);
    return actions;
  }
}
const kinds = (as: L2Action[]) => as.map((a) => a.kind);
const events = (as: L2Action[]) => as.flatMap((a) => (a.kind === 'event' ? [a.reason] : []));

t.test(
  'cordon: label, wait for another node to confirm, then fence; nothing dropped before confirmation unless claimed on the wire',
  async (t) => {
    const w = new World(obs());
    t.strictSame(w.run(), []);
    const a1 = w.run({ draining: true, drainReason: 'cordoned' });
    t.strictSame(kinds(a1), ['fence', 'label', 'event']);
    t.strictSame(
      (a1[0] as Extract<L2Action, { kind: 'fence' }>).spec,
      { vips4: [], vips6: [], interfaces: ['eth0'], memberlistPorts: [], held: ['192.0.2.10'] },
      'the claim watch: the VIP held (answered), nothing dropped',
    );
    t.equal(w.status.phase, 'labelled');
    t.equal(w.status.fenced, false);
    t.strictSame(w.run({ now: T0 + 200 }), []);
    t.equal(w.status.phase, 'awaiting-confirmation');
    // The own ServiceL2Status lingers (MetalLB < 0.16): its presence or absence proves nothing.
    t.strictSame(w.run({ now: T0 + 400, announced: [] }), []);
    const a2 = w.run({ now: T0 + 800, newOwners: { 'web/www': 'node-b' } });
    t.strictSame(kinds(a2), ['fence', 'event']);
    const fence = a2[0] as Extract<L2Action, { kind: 'fence' }>;
    t.strictSame(fence.spec, {
      vips4: ['192.0.2.10'],
      vips6: [],
      interfaces: ['eth0'],
      memberlistPorts: [],
    });
    const ev = a2[1] as Extract<L2Action, { kind: 'event' }>;
    t.match(ev.message, /VIP 192\.0\.2\.10 handed to node-b in 0\.8 s; fence installed on eth0/);
    t.equal(w.status.phase, 'fenced');
    t.ok(settled(w.memory));
    // Steady state: no repeated fence, no repeated events.
    t.strictSame(w.run({ now: T0 + 5_000 }), []);
  },
);

t.test(
  "the claim watch: the new owner's takeover seen on the wire silences this node at once, before its ServiceL2Status confirms (bench-seed's racing order: this node's speaker never saw the label, answered twice 0.25 s)",
  async (t) => {
    const two = { service: 'web/two', ips: ['192.0.2.11'] };
    const w = new World(obs({ announced: [svc, two] }));
    w.run({ draining: true, drainReason: 'cordoned' });
    w.run({ now: T0 + 100 });
    t.strictSame(w.o.fence?.held, ['192.0.2.10', '192.0.2.11']);
    // This node's speaker still announces both (its API view is stale); node-b takes one over.
    const watch = w.o.fence ?? { vips4: [], vips6: [], interfaces: [], memberlistPorts: [] };
    const a = w.run({ now: T0 + 900, fence: { ...watch, claimed: ['192.0.2.10'] } });
    t.strictSame(events(a), ['L2VipClaimed']);
    t.strictSame(kinds(a), ['event', 'fence']);
    t.strictSame([w.o.fence?.vips4, w.o.fence?.held], [['192.0.2.10'], ['192.0.2.11']]);
    t.equal(w.status.phase, 'awaiting-confirmation');
    t.equal(w.status.fenced, false, 'not reported fenced: the handover is not confirmed');
    t.strictSame(w.run({ now: T0 + 1_000 }), [], 'once');
    // A restart meanwhile resumes the handover with its watch (the annotation says awaiting).
    const resumed = resume(parseL2State(JSON.stringify(w.status)), w.o.fence, T0 + 1_100);
    t.strictSame([resumed.phase, resumed.fence], ['labelled', w.o.fence]);
    // Both confirmed: the handover's own fence, both VIPs dropped.
    const c = w.run({ now: T0 + 1_500, newOwners: { 'web/www': 'node-b', 'web/two': 'node-c' } });
    t.strictSame(kinds(c), ['fence', 'event']);
    t.strictSame(w.o.fence, {
      vips4: ['192.0.2.10', '192.0.2.11'],
      vips6: [],
      interfaces: ['eth0'],
      memberlistPorts: [],
    });
    t.equal(w.status.phase, 'fenced');
  },
);

t.test(
  'the claim watch comes off with the label when the handover is refused or given up, and first at the uncordon',
  async (t) => {
    const w = new World(obs());
    w.run({ draining: true, drainReason: 'cordoned' });
    w.run({ now: T0 + 100 });
    t.ok(w.o.fence?.held);
    t.strictSame(kinds(w.run({ now: T0 + 200, draining: false })), ['unfence']);
    t.strictSame(kinds(w.run({ now: T0 + 300 })), ['unlabel']);
    t.equal(w.o.fence, undefined);
  },
);

t.test('a confirmation for only some services does not fence', async (t) => {
  const two = [svc, { service: 'web/api', ips: ['192.0.2.11'] }];
  const w = new World(obs({ announced: two }));
  w.run({ draining: true });
  w.run({ now: T0 + 100 });
  t.strictSame(w.run({ now: T0 + 200, newOwners: { 'web/www': 'node-b' } }), []);
  const a = w.run({ now: T0 + 300, newOwners: { 'web/www': 'node-b', 'web/api': 'node-c' } });
  t.strictSame(kinds(a), ['fence', 'event']);
  t.match((a[1] as { message: string }).message, /192\.0\.2\.11 handed to node-c/);
});

t.test(
  'budget spent unconfirmed while draining: the label comes off (this node announces again), never a fence, not retried until the drain ends',
  async (t) => {
    const w = new World(obs());
    w.run({ draining: true, drainReason: 'cordoned' });
    w.run({ now: T0 + 100 });
    t.equal(w.o.excludeLabel, true);
    const a = w.run({ now: T0 + 30_001 });
    t.strictSame(kinds(a), ['unlabel', 'unfence', 'event']);
    t.strictSame(events(a), ['L2HandoverUnconfirmed']);
    t.match((a[2] as { message: string }).message, /exclude label removed so this node announces again/);
    t.equal(w.o.excludeLabel, false);
    t.equal(w.status.phase, 'idle');
    t.ok(w.status.gaveUp);
    t.equal(statusOf(w.memory, false).gaveUp, true);
    // Still cordoned: no new label, no fence, even when a confirmation shows up late.
    t.strictSame(w.run({ now: T0 + 40_000, newOwners: { 'web/www': 'node-c' } }), []);
    t.equal(w.o.fence, undefined);
    // Someone put the label back on while given up (a failed removal, say): it comes off again.
    w.o = { ...w.o, excludeLabel: true, labelOwned: true };
    t.strictSame(kinds(w.run({ now: T0 + 41_000 })), ['unlabel']);
    // A restart keeps the decision.
    t.equal(
      statusOf(resume(parseL2State(JSON.stringify(w.status)), undefined, T0 + 42_000), false).gaveUp,
      true,
    );
    // The pod going away after all (deleted during the drain): a new attempt, label kept this time.
    const going = structuredClone(w);
    Object.setPrototypeOf(going, World.prototype);
    t.strictSame(kinds(going.run({ now: T0 + 45_000, terminating: true })), ['fence', 'label', 'event']);
    t.notOk(going.status.gaveUp);
    t.equal(settled(going.memory), false, '/prestop waits for the new attempt');
    // Uncordon ends it; the next cordon is a new handover.
    t.strictSame(w.run({ now: T0 + 50_000, draining: false, newOwners: {} }), []);
    t.notOk(w.status.gaveUp);
    t.strictSame(kinds(w.run({ now: T0 + 60_000, draining: true })), ['fence', 'label', 'event']);
  },
);

t.test(
  'budget spent unconfirmed while the pod terminates: warn once, keep the label, a late confirmation still fences',
  async (t) => {
    const w = new World(obs());
    w.run({ terminating: true });
    w.run({ now: T0 + 100 });
    const a = w.run({ now: T0 + 30_001 });
    t.strictSame(kinds(a), ['event']);
    t.strictSame(events(a), ['L2HandoverUnconfirmed']);
    t.strictSame(w.run({ now: T0 + 31_000 }), []);
    t.equal(w.o.excludeLabel, true);
    t.strictSame(w.o.fence?.held, ['192.0.2.10'], 'the claim watch stays: it drops nothing unclaimed');
    t.strictSame(kinds(w.run({ now: T0 + 40_000, newOwners: { 'web/www': 'node-c' } })), ['fence', 'event']);
  },
);

t.test("a pre-existing exclude label (not drainguard's) stays when the handover is given up", async (t) => {
  const w = new World(obs({ excludeLabel: true, labelOwned: false }));
  w.run({ draining: true });
  w.run({ now: T0 + 100 });
  const a = w.run({ now: T0 + 30_001 });
  t.strictSame(kinds(a), ['unfence', 'event']);
  t.match((a[1] as { message: string }).message, /not added by drainguard: left in place/);
  t.equal(w.o.excludeLabel, true);
});

t.test(
  'two nodes cordoned at once counted each other: the re-check after the label takes it back, no fence',
  async (t) => {
    const w = new World(obs({ otherCandidates: ['node-b'] }));
    t.strictSame(kinds(w.run({ draining: true })), ['fence', 'label', 'event']);
    // node-b was cordoned and labelled meanwhile: nobody else could announce.
    const a = w.run({ now: T0 + 2_000, otherCandidates: [] });
    t.strictSame(kinds(a), ['unlabel', 'unfence', 'event']);
    t.strictSame(events(a), ['L2HandoverImpossible']);
    t.equal(w.o.excludeLabel, false);
    t.ok(w.status.stranded && w.status.phase === 'idle');
    t.equal(w.o.fence, undefined);
    // A late status of node-b changes nothing while nobody else could announce.
    t.strictSame(w.run({ now: T0 + 3_000, newOwners: { 'web/www': 'node-b' } }), []);
  },
);

t.test('never strand a VIP: no other candidate means no label and no fence, said once', async (t) => {
  const w = new World(obs({ otherCandidates: [] }));
  const a = w.run({ draining: true });
  t.strictSame(events(a), ['L2HandoverImpossible']);
  t.strictSame(kinds(a), ['event']);
  t.ok(w.status.stranded && settled(w.memory));
  t.strictSame(w.run({ now: T0 + 1000 }), []);
  // A node becomes available: the handover starts.
  t.strictSame(kinds(w.run({ now: T0 + 2000, otherCandidates: ['node-b'] })), ['fence', 'label', 'event']);
});

t.test('unknown candidates (not listed yet) wait instead of guessing', async (t) => {
  const w = new World(obs({ otherCandidates: undefined }));
  t.strictSame(w.run({ draining: true }), []);
  t.equal(w.status.phase, 'idle');
});

t.test('uncordon: fence removed first, then the label drainguard added', async (t) => {
  const w = new World(obs());
  w.run({ draining: true });
  w.run({ now: T0 + 100, newOwners: { 'web/www': 'node-b' } });
  w.run({ now: T0 + 200 });
  t.equal(w.status.phase, 'fenced');
  t.strictSame(kinds(w.run({ now: T0 + 300, draining: false })), ['unfence']);
  t.equal(w.status.phase, 'undoing');
  t.strictSame(kinds(w.run({ now: T0 + 400 })), ['unlabel']);
  t.strictSame(events(w.run({ now: T0 + 500 })), ['L2HandoverUndone']);
  t.equal(w.status.phase, 'idle');
  t.strictSame(w.run({ now: T0 + 600 }), []);
});

t.test('a pre-existing exclude label (kubeadm control plane) is kept on uncordon', async (t) => {
  const w = new World(obs({ excludeLabel: true, labelOwned: false }));
  const a = w.run({ draining: true });
  t.strictSame(kinds(a), ['fence', 'event'], 'no label action: it is already there');
  w.run({ now: T0 + 100, newOwners: { 'web/www': 'node-b' } });
  w.run({ now: T0 + 200, draining: false });
  const rest = [w.run({ now: T0 + 300 }), w.run({ now: T0 + 400 })].flat();
  t.ok(!kinds(rest).includes('unlabel'));
  t.equal(w.o.excludeLabel, true);
  t.equal(w.status.phase, 'idle');
});

t.test(
  'fail-safe: API down while draining fences after the grace and cuts memberlist; undone when API is back',
  async (t) => {
    const w = new World(obs({ draining: true }));
    w.run();
    w.run({ now: T0 + 100 });
    t.equal(w.status.phase, 'awaiting-confirmation');
    t.strictSame(w.run({ now: T0 + 1000, apiDownSince: T0 + 500 }), []);
    t.strictSame(w.run({ now: T0 + 5_400, apiDownSince: T0 + 500 }), []);
    const a = w.run({ now: T0 + 5_500, apiDownSince: T0 + 500 });
    t.strictSame(kinds(a), ['fence', 'event']);
    t.strictSame((a[0] as Extract<L2Action, { kind: 'fence' }>).spec.memberlistPorts, [7946]);
    t.equal((a[1] as { type: string }).type, 'Warning');
    t.equal(w.status.phase, 'failsafe-fenced');
    // Uncordoned while the API is still down: unknowable, so the fail-safe stays.
    t.strictSame(w.run({ now: T0 + 6_000, draining: false }), []);
    // After the 6.5 s outage, the fence and its cut stay for twice that (the peers' watches catch
    // up), then the label while memberlist rejoins.
    t.strictSame(kinds(w.run({ now: T0 + 7_000, apiDownSince: undefined })), []);
    t.strictSame(kinds(w.run({ now: T0 + 7_000 + 13_000 - 1 })), []);
    t.strictSame(kinds(w.run({ now: T0 + 7_000 + 13_000 })), ['unfence']);
    t.strictSame(kinds(w.run({ now: T0 + 20_100 })), [], 'the label stays while memberlist rejoins');
    t.strictSame(kinds(w.run({ now: T0 + 20_000 + REJOIN_MS })), ['unlabel']);
  },
);

/** Draining, the API gone from T0 + 500: the fail-safe fence, memberlist cut, at T0 + 5_500. */
function failsafeFenced(t: Test): World {
  const w = new World(obs({ draining: true }));
  w.run();
  w.run({ now: T0 + 100 });
  w.run({ now: T0 + 1000, apiDownSince: T0 + 500 });
  t.strictSame(kinds(w.run({ now: T0 + 5_500, apiDownSince: T0 + 500 })), ['fence', 'event']);
  return w;
}

t.test(
  'fail-safe undone with the exclude label gone (robustness SEED=66 TRIAL=0: dual 245 ms): the label goes back before the cut comes off',
  async (t) => {
    const w = failsafeFenced(t);
    t.equal(w.status.phase, 'failsafe-fenced');
    // The label went meanwhile (a terminating pod's sidecar, a user): nothing silences the speaker.
    w.o = { ...w.o, excludeLabel: false, labelOwned: false };
    t.strictSame(
      kinds(w.run({ now: T0 + 7_000, apiDownSince: undefined, draining: false })),
      ['label'],
      'the label first; the fence and its memberlist cut stay',
    );
    t.strictSame(
      kinds(w.run({ now: T0 + 7_100 })),
      [],
      'the label seen; the cut stays while the speakers catch up with the API (twice the outage)',
    );
    const later: string[] = [];
    for (let at = T0 + 8_000; at <= T0 + 40_000; at += 1_000)
      later.push(...kinds(w.run({ now: at })).map((k) => `${k}@${at - T0}`));
    t.strictSame(
      later,
      ['unfence@20000', 'unlabel@30000', 'event@31000'],
      'the fence comes off at the catch-up, the label REJOIN_MS later, and the undo ends',
    );
    t.equal(w.status.phase, 'idle');
  },
);

t.test(
  "fail-safe undone after an API outage, the label on: the cut stays until the peers' watches have caught up (robustness SEED=66 TRIAL=0: dark 2.29 s)",
  async (t) => {
    // The API server restarted during the drain and the fail-safe cut memberlist. At the uncordon
    // node-b's speaker was still in its Node watch's backoff, its view without the label: lifted
    // then, the cut let node-b hear this node's speaker, elect it back and withdraw, while this
    // node's speaker, seeing the label, stayed silent until node-b relisted.
    const w = failsafeFenced(t);
    t.ok((w.memory.fence?.memberlistPorts.length ?? 0) > 0, 'the fail-safe fence cuts memberlist');
    const back = T0 + 9_000;
    t.strictSame(kinds(w.run({ now: back, apiDownSince: undefined, draining: false })), []);
    t.equal(w.status.phase, 'undoing');
    t.ok(needsTick(w.memory, w.o), 'the edge ticks while the fence is held');
    const catchUp = back + 2 * (back - (T0 + 500));
    t.strictSame(kinds(w.run({ now: catchUp - 1 })), [], 'held until twice the outage after it ended');
    t.strictSame(kinds(w.run({ now: catchUp })), ['unfence'], 'then the fence and its cut come off');
    t.strictSame(
      kinds(w.run({ now: catchUp + REJOIN_MS - 1 })),
      [],
      'the label stays while memberlist rejoins',
    );
    t.strictSame(kinds(w.run({ now: catchUp + REJOIN_MS })), ['unlabel']);
    t.strictSame(kinds(w.run({ now: catchUp + REJOIN_MS + 100 })), ['event'], 'the undo ends');
  },
);

t.test(
  "a replacement pod resuming a fail-safe fence after the API came back, the label gone: the cut stays until the peers' watches can have caught up (robustness SEED=66 TRIAL=0: dark 3.1 s)",
  async (t) => {
    // The fail-safe cut memberlist before the label was ever seen. The pod was deleted, the API came
    // back, the node was uncordoned; the replacement's sidecar finds the cut fence and no label, and
    // never saw the outage. It put the label back and lifted the cut once its own view showed it:
    // node-b's speaker, still in its Node watch's backoff with a view from before the label, heard
    // this node again, elected it and withdrew; this node's speaker, seeing the label, stayed silent.
    const fence = {
      vips4: [],
      vips6: [],
      interfaces: ['eth0'],
      memberlistPorts: [7946],
      pools: ['192.0.2.0-192.0.2.255'],
      held: ['192.0.2.10'],
    };
    const w = new World(obs({ draining: false, excludeLabel: false, labelOwned: false, fence }));
    w.memory = resume(undefined, fence, T0, false);
    t.equal(w.memory.phase, 'failsafe-fenced');
    t.strictSame(kinds(w.run({ now: T0 + 100 })), ['label'], 'the label first');
    w.o = { ...w.o, excludeLabel: true, labelOwned: true };
    const later: string[] = [];
    for (let at = T0 + 1_000; at <= T0 + 50_000; at += 1_000)
      later.push(...kinds(w.run({ now: at })).map((k) => `${k}@${at - T0}`));
    t.strictSame(
      later,
      [`unfence@${SPEAKER_CATCH_UP_MAX_MS}`, `unlabel@${SPEAKER_CATCH_UP_MAX_MS + REJOIN_MS}`, 'event@41000'],
      'the cut held for the longest catch-up after this start, then the label REJOIN_MS more',
    );
  },
);

t.test('a label that cannot be put back keeps the cut fence at most RELABEL_MAX_MS', async (t) => {
  const w = new World(obs({ draining: true }));
  w.run();
  w.run({ now: T0 + 100 });
  w.run({ now: T0 + 1000, apiDownSince: T0 + 500 });
  w.run({ now: T0 + 5_500, apiDownSince: T0 + 500 });
  w.o = { ...w.o, excludeLabel: false, labelOwned: false };
  // The label write never takes effect (a missing grant).
  const stuck = (over: Partial<L2Observation>) => {
    const as = w.run(over);
    w.o = { ...w.o, excludeLabel: false, labelOwned: false };
    return kinds(as);
  };
  t.strictSame(stuck({ now: T0 + 7_000, apiDownSince: undefined, draining: false }), ['label']);
  t.strictSame(stuck({ now: T0 + 7_000 + RELABEL_MAX_MS - 1 }), ['label']);
  // No more label writes; the fence comes off once the speakers have caught up (twice the outage).
  t.strictSame(stuck({ now: T0 + 7_000 + RELABEL_MAX_MS }), []);
  t.strictSame(stuck({ now: T0 + 7_000 + 13_000 }), ['unfence']);
});

t.test(
  "handback after an API outage: the label stays until this node's speaker has had time to see the API again (robustness SEED=5 TRIAL=2: dark 1.1 s)",
  async (t) => {
    // The node's path to the API dropped 5.0–12.2 s into the drain; the handover to node-b was
    // done before. The uncordon is seen when the path is back; unlabelled at once, node-b's
    // speaker withdrew while this node's speaker, its watch still in its backoff, saw the label
    // go 1.1 s later: nobody answered meanwhile.
    const w = new World(obs());
    w.run({ draining: true, drainReason: 'cordoned' });
    w.run({ now: T0 + 100 });
    w.run({ now: T0 + 200, newOwners: { 'web/www': 'node-b' } });
    t.equal(w.status.phase, 'fenced');
    w.run({ now: T0 + 5_000, apiDownSince: T0 + 5_000 });
    w.run({ now: T0 + 9_000 });
    t.equal(w.status.phase, 'fenced', 'confirmed before the outage: no fail-safe');
    const back = T0 + 12_200;
    t.strictSame(kinds(w.run({ now: back, apiDownSince: undefined, draining: false })), ['unfence']);
    t.strictSame(kinds(w.run({ now: back + 100 })), [], 'the label stays');
    t.ok(needsTick(w.memory, w.o), 'the edge ticks while the label is held');
    t.strictSame(kinds(w.run({ now: back + 2 * 7_200 - 100 })), [], 'for twice the outage');
    t.strictSame(kinds(w.run({ now: back + 2 * 7_200 })), ['unlabel']);
    t.strictSame(events(w.run({ now: back + 2 * 7_200 + 100 })), ['L2HandoverUndone']);
    t.equal(w.status.phase, 'idle');
    t.notOk(needsTick(w.memory, w.o));
  },
);

t.test(
  'robustness seed 90 trial 21: a second, short outage does not cut the hold of the first (dark 1.86 s)',
  async (t) => {
    // Replayed from node-c's sidecar log (ms from the drain): the drain state as the watcher
    // published it. The path from the API server to node-c was dropped 1.2–9.9 s and the node
    // uncordoned at 2.3 s. The sidecar's status write timed out (API down from 5.25 s, back at
    // 11.28 s), failed again at 11.65 s, saw the uncordon at 11.68 s (apiDownSince restarted:
    // the view changed while down) and had the API back at 12.0 s. Only that last 0.36 s outage
    // was remembered: the label came off at ~12.7 s, node-b's speaker withdrew at 12.89 s, and
    // node-c's speaker, its watches stalled on the same path, saw the label go at 14.75 s.
    const vip = { service: 'web/www', ips: ['198.51.100.100'] };
    const w = new World(obs({ now: T0 - 59_000, announced: [vip], otherCandidates: ['node-a', 'node-b'] }));
    w.run();
    // An API outage before the trial: its hold (16.3 s down, so 30 s) ran until 7.9 s.
    w.run({ now: T0 - 38_361, apiDownSince: T0 - 38_361, apiFailedAt: T0 - 38_361 });
    w.run({ now: T0 - 22_065, apiDownSince: undefined, apiFailedAt: T0 - 22_410 });
    t.strictSame(kinds(w.run({ now: T0 + 185, draining: true, drainReason: 'cordoned' })), [
      'fence',
      'label',
      'event',
    ]);
    w.run({ now: T0 + 1_000 });
    const done = w.run({ now: T0 + 1_448, newOwners: { 'web/www': 'node-b' } });
    t.strictSame(kinds(done), ['fence', 'event']);
    t.equal(w.status.phase, 'fenced');
    w.run({ now: T0 + 5_250, apiDownSince: T0 + 5_250, apiFailedAt: T0 + 5_250 });
    w.run({ now: T0 + 11_278, apiDownSince: undefined, apiFailedAt: T0 + 9_762 });
    w.run({ now: T0 + 11_646, apiDownSince: T0 + 11_646, apiFailedAt: T0 + 11_646 });
    const over = w.run({
      now: T0 + 11_680,
      draining: false,
      drainReason: undefined,
      apiDownSince: T0 + 11_680,
    });
    t.strictSame(kinds(over), ['unfence'], 'the fence comes off at once, API or not');
    const back = T0 + 12_005;
    t.strictSame(kinds(w.run({ now: back, apiDownSince: undefined, apiFailedAt: T0 + 11_865 })), []);
    t.ok(needsTick(w.memory, w.o), 'the edge ticks while the label is held');
    t.strictSame(kinds(w.run({ now: T0 + 12_700 })), [], 'not after the last 0.36 s outage alone');
    t.strictSame(kinds(w.run({ now: T0 + 14_754 })), [], "node-c's speaker saw the label go only now");
    t.strictSame(
      kinds(w.run({ now: T0 + 11_278 + 2 * 6_028 })),
      [],
      'nor after twice the 6 s outage from when it ended',
    );
    // One outage from the first one's start (each began within the last one's hold): at most
    // SPEAKER_CATCH_UP_MAX_MS after the API answered again.
    t.strictSame(kinds(w.run({ now: back + 30_000 - 1 })), []);
    t.strictSame(kinds(w.run({ now: back + 30_000 })), ['unlabel']);
    t.strictSame(events(w.run({ now: back + 30_100 })), ['L2HandoverUndone']);
    t.equal(w.status.phase, 'idle');
  },
);

t.test("an outage after the last one's hold ran out counts on its own, from when it began", async (t) => {
  const w = new World(obs());
  // 5 s down, back at T0: held until T0 + 10 s. The next outage begins after that.
  w.run({ now: T0 - 5_000, apiDownSince: T0 - 5_000 });
  w.run({ now: T0, apiDownSince: undefined });
  w.run({ now: T0 + 11_000, draining: true, drainReason: 'cordoned' });
  w.run({ now: T0 + 11_100 });
  w.run({ now: T0 + 11_200, newOwners: { 'web/www': 'node-b' } });
  t.equal(w.status.phase, 'fenced');
  w.run({ now: T0 + 12_000, apiDownSince: T0 + 12_000 });
  // The view changes while down: the watcher restarts apiDownSince (the fail-safe's grace), the
  // outage is still the one from 12 s.
  t.strictSame(kinds(w.run({ now: T0 + 12_500, draining: false, apiDownSince: T0 + 12_500 })), ['unfence']);
  t.strictSame(kinds(w.run({ now: T0 + 13_000, apiDownSince: undefined })), []);
  t.strictSame(kinds(w.run({ now: T0 + 13_000 + 2 * 1_000 - 1 })), [], 'twice the 1 s outage');
  t.strictSame(kinds(w.run({ now: T0 + 13_000 + 2 * 1_000 })), ['unlabel']);
});

t.test('handback with the API up all along (or an outage long ago): unlabelled at once', async (t) => {
  const w = new World(obs());
  w.run({ now: T0 - 600_000, apiDownSince: T0 - 600_000 });
  w.run({ now: T0 - 590_000, apiDownSince: undefined });
  w.run({ now: T0, draining: true, drainReason: 'cordoned' });
  w.run({ now: T0 + 100 });
  w.run({ now: T0 + 200, newOwners: { 'web/www': 'node-b' } });
  t.strictSame(kinds(w.run({ now: T0 + 1_000, draining: false })), ['unfence']);
  t.strictSame(kinds(w.run({ now: T0 + 1_100 })), ['unlabel']);
});

t.test(
  'fail-safe fence covers every foreign ARP/NA when the own addresses are known (the cut-off speaker announces every VIP)',
  async (t) => {
    const own = ['192.0.2.1', 'fe80::1'];
    const w = new World(
      obs({ draining: true, apiDownSince: T0 - 10_000, otherCandidates: undefined, ownAddresses: own }),
    );
    const a = w.run();
    const fence = a[0] as Extract<L2Action, { kind: 'fence' }>;
    t.equal(fence.kind, 'fence');
    t.strictSame(fence.spec.ownAddresses, own);
    t.strictSame(fence.spec.memberlistPorts, [7946]);
    t.match(
      (a[1] as { message: string }).message,
      /every ARP\/NA not from this node's own addresses \(MetalLB's address pools never read; VIPs announced here: 192\.0\.2\.10; 192\.0\.2\.10 answered here until another node claims it on the wire/,
    );
    // Confirmed once the API is back: the broad drop and the cut stay until the drain ends.
    w.run({ now: T0 + 1000, apiDownSince: undefined, ownAddresses: undefined, otherCandidates: ['node-b'] });
    w.run({ now: T0 + 1100, newOwners: { 'web/www': 'node-b' } });
    t.strictSame(kinds(w.run({ now: T0 + 60_000 })), []);
    t.match(w.status, { phase: 'fenced', failsafeDrop: 'foreign', memberlistCut: true });
    t.strictSame(w.o.fence?.ownAddresses, own);
  },
);

t.test(
  'per service: a service no other node may announce blocks the label; the Event names it',
  async (t) => {
    const local = { service: 'web/local', ips: ['192.0.2.20'] };
    const w = new World(
      obs({
        announced: [svc, local],
        serviceCandidates: { 'web/www': ['node-b', 'node-c'], 'web/local': [] },
      }),
    );
    const a = w.run({ draining: true, drainReason: 'cordoned' });
    t.strictSame(kinds(a), ['event']);
    t.strictSame(events(a), ['L2HandoverImpossible']);
    t.match((a[0] as { message: string }).message, /web\/local \(192\.0\.2\.20\)/);
    t.notMatch((a[0] as { message: string }).message, /web\/www/);
    t.ok(w.status.stranded);
    // Its endpoint moved to node-c: now the handover starts.
    const b = w.run({
      now: T0 + 2_000,
      serviceCandidates: { 'web/www': ['node-b', 'node-c'], 'web/local': ['node-c'] },
    });
    t.strictSame(kinds(b), ['fence', 'label', 'event']);
  },
);

t.test('per service: eligibility lost after the label takes the label back', async (t) => {
  const w = new World(obs({ serviceCandidates: { 'web/www': ['node-b'] } }));
  w.run({ draining: true, drainReason: 'cordoned' });
  t.equal(w.o.excludeLabel, true);
  const a = w.run({ now: T0 + 500, serviceCandidates: { 'web/www': [] } });
  t.strictSame(kinds(a), ['unlabel', 'unfence', 'event']);
  t.strictSame(events(a), ['L2HandoverImpossible']);
  t.equal(w.status.phase, 'idle');
  t.ok(w.status.stranded);
});

t.test(
  'fail-safe with the API back while still draining: the confirmed handover keeps the fail-safe fence and its memberlist cut',
  async (t) => {
    const w = new World(obs({ draining: true, apiDownSince: T0 - 10_000, otherCandidates: undefined }));
    const a = w.run();
    t.strictSame(kinds(a), ['fence', 'event']);
    t.equal(w.status.phase, 'failsafe-fenced');
    const back = w.run({ now: T0 + 1000, apiDownSince: undefined, otherCandidates: ['node-b'] });
    t.strictSame(kinds(back), ['label', 'event']);
    t.strictSame(events(back), ['L2HandoverStarted']);
    const done = w.run({ now: T0 + 1100, newOwners: { 'web/www': 'node-b' } });
    t.strictSame(kinds(done), ['event', 'fence']);
    t.strictSame(events(done), ['L2HandoverConfirmed']);
    t.strictSame(w.o.fence?.memberlistPorts, [7946]);
    t.strictSame(w.o.fence?.vips4, ['192.0.2.10'], 'node-b has it: the VIP held so far is dropped outright');
    t.equal(w.o.fence?.held, undefined);
    t.equal(w.status.phase, 'fenced');
    t.ok(w.status.failsafeKept);
  },
);

t.test('fail-safe is not used on a known single-speaker cluster', async (t) => {
  const w = new World(obs({ draining: true, apiDownSince: T0 - 10_000, otherCandidates: [] }));
  t.ok(!kinds(w.run()).includes('fence'));
});

t.test('without the ServiceL2Status CRD the fence waits the settle time, unconfirmed', async (t) => {
  const w = new World(obs({ statusSource: 'services' }));
  w.run({ draining: true });
  t.strictSame(w.run({ now: T0 + 9_000 }), []);
  const a = w.run({ now: T0 + 10_000 });
  t.strictSame(kinds(a), ['fence', 'event']);
  t.strictSame(events(a), ['L2HandoverUnconfirmedFence']);
});

t.test('no VIP announced here and nothing to confirm from: done at once, no settle time', async (t) => {
  // A rollout restart of a speaker that announces nothing waited the whole settle time (10 s per
  // node, make bench-rollout) for peers to take over VIPs it never had.
  const w = new World(obs({ statusSource: 'services', announced: [] }));
  t.strictSame(kinds(w.run({ terminating: true })), ['label', 'event']);
  const a = w.run({ now: T0 + 100 });
  t.strictSame(events(a), ['L2HandoverDone']);
  t.ok(settled(w.memory), '/prestop answers');
});

t.test('the L2HandoverStarted Event names a few candidates and counts the rest', async (t) => {
  // Among 5,000 Nodes the message listed every one of them.
  const many = Array.from({ length: 5_000 }, (_, i) => `node-${i}`);
  const w = new World(obs({ otherCandidates: many }));
  const started = w.run({ draining: true }).find((a) => a.kind === 'event');
  t.match(started, { reason: 'L2HandoverStarted' });
  const message = started?.kind === 'event' ? started.message : '';
  t.match(message, /to one of node-0, node-1, node-2, node-3, node-4 and 4995 more$/);
  t.ok(message.length < 200, `${message.length} characters`);
  t.equal(someOf(['node-b', 'node-c']), 'node-b, node-c');
});

t.test('terminating pod triggers the handover too', async (t) => {
  const w = new World(obs());
  t.strictSame(kinds(w.run({ terminating: true })), ['fence', 'label', 'event']);
});

t.test('restart mid-handover: resumes from annotation and nft without a second fence', async (t) => {
  const w = new World(obs({ draining: true }));
  w.run();
  w.run({ now: T0 + 100, newOwners: { 'web/www': 'node-b' } });
  const status = JSON.stringify(statusOf(w.memory, false));
  // "Restart": memory rebuilt from the annotation and the installed fence.
  const memory = resume(parseL2State(status), w.o.fence, T0 + 10_000);
  t.equal(statusOf(memory, false).phase, 'fenced');
  const { actions } = step(memory, { ...w.o, now: T0 + 10_000 }, cfg);
  t.strictSame(actions, []);
  // Killed after labelling, before confirmation: continues waiting, does not relabel.
  const w2 = new World(obs({ draining: true }));
  w2.run();
  const mid = resume(parseL2State(JSON.stringify(statusOf(w2.memory, false))), undefined, T0 + 500);
  t.equal(statusOf(mid, false).phase, 'labelled');
  const r = step(mid, { ...w2.o, now: T0 + 600 }, cfg);
  t.strictSame(r.actions, []);
  t.equal(statusOf(r.memory, false).phase, 'awaiting-confirmation');
  // A fence left by the fail-safe resumes as such.
  t.equal(
    resume(undefined, { vips4: ['192.0.2.10'], vips6: [], interfaces: ['eth0'], memberlistPorts: [7946] }, T0)
      .phase,
    'failsafe-fenced',
  );
  t.equal(parseL2State('{"phase":"bogus"}'), undefined);
  t.equal(parseL2State('not json'), undefined);
});

t.test('restart after uncordon: leftovers (fence, own label) are undone', async (t) => {
  const w = new World(
    obs({
      excludeLabel: true,
      labelOwned: true,
      fence: { vips4: ['192.0.2.10'], vips6: [], interfaces: ['eth0'], memberlistPorts: [] },
    }),
  );
  t.strictSame(kinds(w.run()), ['unfence']);
  t.strictSame(kinds(w.run()), ['unlabel']);
});

t.test(
  'restart while fenced during an API outage: nothing is undone until the drain state is known',
  async (t) => {
    const fence = { vips4: ['192.0.2.10'], vips6: [], interfaces: ['eth0'], memberlistPorts: [] };
    // What a restart with the API unreachable sees: the fence from nft, no Node, not synced.
    const w = new World(
      obs({
        synced: false,
        draining: false,
        apiDownSince: T0,
        excludeLabel: false,
        labelOwned: false,
        fence,
      }),
    );
    w.memory = resume(undefined, fence, T0);
    for (let i = 0; i < 5; i++) t.strictSame(kinds(w.run({ now: T0 + i * 1000 })), []);
    t.equal(w.status.phase, 'fenced');
    // The API answers (the Node with the label): still cordoned, so the fence stays; uncordoned, it goes.
    const answered = {
      synced: true,
      apiDownSince: undefined,
      draining: true,
      excludeLabel: true,
      labelOwned: true,
    };
    t.strictSame(kinds(w.run({ now: T0 + 6000, ...answered })), []);
    t.equal(w.status.phase, 'fenced');
    t.strictSame(kinds(w.run({ now: T0 + 7000, draining: false })), ['unfence']);
  },
);

// --- issue 22: the fail-safe never overturns a refusal, ends when the API is back, and once it
// fired its fence and memberlist cut stay until the drain ends ------------------------------

t.test(
  'refused (a service only this node may announce): an API outage fires no fail-safe, and no label once it is back',
  async (t) => {
    const w = new World(obs({ serviceCandidates: { 'web/www': [] } }));
    t.strictSame(events(w.run({ draining: true })), ['L2HandoverImpossible']);
    t.ok(w.status.stranded);
    // A control-plane rollout longer than the grace (5 s): the candidates are unknown meanwhile.
    for (let i = 1; i <= 7; i++)
      t.strictSame(
        kinds(w.run({ now: T0 + i * 1000, apiDownSince: T0, otherCandidates: undefined })),
        [],
        `${i} s into the outage: no fence, no cut`,
      );
    t.equal(w.o.fence, undefined);
    const back = w.run({
      now: T0 + 8000,
      apiDownSince: undefined,
      otherCandidates: ['node-b', 'node-c'],
      serviceCandidates: { 'web/www': [] },
    });
    t.strictSame(kinds(back), [], 'no label: the refusal stands');
    t.equal(w.o.excludeLabel, false);
    t.ok(w.status.stranded);
  },
);

t.test('given up unconfirmed: an API outage fires no fail-safe (the label stays off)', async (t) => {
  const w = new World(obs());
  w.run({ draining: true });
  w.run({ now: T0 + 100 });
  w.run({ now: T0 + 30_001 });
  t.ok(w.status.gaveUp);
  t.strictSame(kinds(w.run({ now: T0 + 40_000, apiDownSince: T0 + 31_000 })), []);
  t.equal(w.o.fence, undefined);
  t.strictSame(kinds(w.run({ now: T0 + 41_000, apiDownSince: undefined })), []);
  t.equal(w.o.excludeLabel, false);
});

/** Draining; the API went away before anything was read; the fail-safe fence is on. */
function inFailsafe(over: Partial<L2Observation> = {}) {
  const w = new World(
    obs({ draining: true, apiDownSince: T0 - 10_000, otherCandidates: undefined, ...over }),
  );
  const a = w.run();
  if (!kinds(a).includes('fence')) throw new Error(`no fail-safe: ${JSON.stringify(a)}`);
  return w;
}

t.test(
  'the fail-safe holds the VIPs announced here (answered on) until another node claims them on the wire, then drops them outright (robustness SEED=91 TRIAL=62: fenced at once, dark 4.9 s until memberlist declared the node dead)',
  async (t) => {
    const pools = ['192.0.2.100-192.0.2.120'];
    const two = { service: 'web/two', ips: ['192.0.2.11', '2001:db8::11'] };
    const w = inFailsafe({ pools, announced: [svc, two] });
    t.strictSame(w.o.fence?.held, ['192.0.2.10', '192.0.2.11', '2001:db8::11']);
    t.strictSame([w.o.fence?.vips4, w.o.fence?.vips6], [[], []], 'no VIP announced here dropped yet');
    t.strictSame(w.o.fence?.pools, pools, "the rest of MetalLB's pools dropped at once");
    t.strictSame(w.o.fence?.memberlistPorts, [7946]);
    t.match(w.status, {
      phase: 'failsafe-fenced',
      fenced: true,
      held: ['192.0.2.10', '192.0.2.11', '2001:db8::11'],
    });
    t.strictSame(kinds(w.run({ now: T0 + 1_000 })), [], 'steady while nobody claims them');
    // node-b's speaker takes 192.0.2.10 over (the peers declared node-a dead): the kernel saw its
    // gratuitous ARP and drops node-a's ARP for it; the fence read back says so.
    const claimedFence = { ...(w.o.fence ?? { vips4: [], vips6: [], interfaces: [], memberlistPorts: [] }) };
    const a = w.run({ now: T0 + 5_000, fence: { ...claimedFence, claimed: ['192.0.2.10'] } });
    t.strictSame(events(a), ['L2VipClaimed']);
    t.match(
      (a.find((x) => x.kind === 'event') as { message: string }).message,
      /another node claimed 192\.0\.2\.10 on the wire/,
    );
    t.strictSame(kinds(a), ['event', 'fence'], 're-rendered with the claimed VIP dropped outright');
    t.strictSame(w.o.fence?.vips4, ['192.0.2.10']);
    t.strictSame(w.o.fence?.held, ['192.0.2.11', '2001:db8::11']);
    t.strictSame(w.status.held, ['192.0.2.11', '2001:db8::11']);
    t.strictSame(kinds(w.run({ now: T0 + 6_000 })), [], 'once');
    // The other two claimed as well (an unsolicited NA for the IPv6 one): nothing held any more.
    w.run({
      now: T0 + 7_000,
      fence: { ...(w.o.fence ?? claimedFence), claimed: ['192.0.2.11', '2001:db8::11'] },
    });
    t.strictSame([w.o.fence?.vips4, w.o.fence?.vips6], [['192.0.2.10', '192.0.2.11'], ['2001:db8::11']]);
    t.equal(w.o.fence?.held, undefined);
    t.equal(w.status.held, undefined);
    t.equal(w.status.phase, 'failsafe-fenced');
    // A restart reads the fence back: the held VIPs count among the services it covers.
    const restarted = resume(undefined, { ...claimedFence, claimed: [] }, T0 + 8_000);
    t.strictSame(restarted.services[0]?.ips, ['192.0.2.10', '192.0.2.11', '2001:db8::11']);
  },
);

t.test(
  "a fail-safe after a new owner was already seen drops that service's VIPs at once: no claim may come (it took over before the fence)",
  async (t) => {
    const two = { service: 'web/two', ips: ['192.0.2.11'] };
    const w = inFailsafe({ announced: [svc, two], newOwners: { 'web/www': 'node-b' } });
    t.strictSame(w.o.fence?.vips4, ['192.0.2.10']);
    t.strictSame(w.o.fence?.held, ['192.0.2.11']);
  },
);

t.test(
  'fenced after the settle time (nothing can confirm), then the API lost: the fail-safe keeps the VIP dropped, not held again beside the owner that took it over',
  async (t) => {
    const w = new World(obs({ statusSource: 'services' }));
    w.run({ draining: true, drainReason: 'cordoned' });
    w.run({ now: T0 + 100 });
    w.run({ now: T0 + 10_100 });
    t.equal(w.status.phase, 'fenced');
    t.strictSame(w.o.fence?.vips4, ['192.0.2.10']);
    w.run({
      now: T0 + 20_000,
      apiDownSince: T0 + 14_000,
      otherCandidates: undefined,
      pools: ['192.0.2.100-192.0.2.120'],
    });
    t.equal(w.status.phase, 'failsafe-fenced');
    t.strictSame(w.o.fence?.vips4, ['192.0.2.10'], 'still dropped');
    t.equal(w.o.fence?.held, undefined, 'not held: its takeover came before the fail-safe');
    t.strictSame(w.o.fence?.memberlistPorts, [7946]);
  },
);

t.test(
  'after a fail-safe, API back: a service no other node may announce refuses the handover; fail-safe fence and cut removed, no label',
  async (t) => {
    const w = inFailsafe();
    t.equal(w.status.phase, 'failsafe-fenced');
    const back = w.run({
      now: T0 + 1000,
      apiDownSince: undefined,
      otherCandidates: ['node-b'],
      serviceCandidates: { 'web/www': [] },
    });
    t.ok(!kinds(back).includes('label'), 'never labelled');
    t.ok(kinds(back).includes('unfence'), 'the fail-safe ends: fence and memberlist cut removed');
    t.strictSame(events(back), ['L2HandoverImpossible']);
    t.match((back.find((a) => a.kind === 'event') as { message: string }).message, /web\/www/);
    t.equal(w.o.fence, undefined);
    t.equal(w.status.phase, 'idle');
    t.ok(w.status.stranded);
    t.strictSame(kinds(w.run({ now: T0 + 2000 })), []);
  },
);

t.test(
  'after a fail-safe, API back, nobody confirms within the budget: given up — label off, fail-safe fence and cut removed',
  async (t) => {
    const w = inFailsafe();
    t.strictSame(kinds(w.run({ now: T0 + 1000, apiDownSince: undefined, otherCandidates: ['node-b'] })), [
      'label',
      'event',
    ]);
    w.run({ now: T0 + 1100 });
    t.equal(w.status.phase, 'awaiting-confirmation');
    t.ok(w.o.fence?.memberlistPorts.length, 'the fail-safe fence stays while the handover runs');
    t.strictSame(kinds(w.run({ now: T0 + 30_000 })), [], 'the budget counts from the label');
    const a = w.run({ now: T0 + 31_001 });
    t.ok(kinds(a).includes('unlabel') && kinds(a).includes('unfence'), JSON.stringify(kinds(a)));
    t.strictSame(events(a), ['L2HandoverUnconfirmed']);
    t.equal(w.o.fence, undefined);
    t.equal(w.o.excludeLabel, false);
    t.ok(w.status.gaveUp);
  },
);

t.test('a Service deleted during the outage does not hold the fail-safe for ever', async (t) => {
  const gone = { service: 'web/gone', ips: ['192.0.2.11'] };
  const w = inFailsafe({ announced: [svc, gone] });
  w.run({
    now: T0 + 1000,
    apiDownSince: undefined,
    otherCandidates: ['node-b'],
    announced: [svc],
    goneServices: ['web/gone'],
  });
  w.run({ now: T0 + 1100, newOwners: { 'web/www': 'node-b' } });
  t.equal(w.status.phase, 'fenced', 'confirmed without the deleted one');
  t.strictSame(w.status.services, [svc]);
  t.strictSame(w.status.handedTo, { 'web/www': 'node-b' });
});

t.test(
  'restarted without the Node annotation while fail-safe fenced: decided from scratch once the API answers',
  async (t) => {
    const fence = {
      vips4: [],
      vips6: [],
      interfaces: ['eth0'],
      memberlistPorts: [7946],
      ownAddresses: ['192.0.2.1'],
    };
    const w = new World(obs({ draining: true, fence }));
    w.memory = resume(undefined, fence, T0);
    t.equal(w.status.phase, 'failsafe-fenced');
    t.strictSame(kinds(w.run({ now: T0 + 100 })), ['label', 'event']);
    w.run({ now: T0 + 200, newOwners: { 'web/www': 'node-b' } });
    t.equal(w.status.phase, 'fenced');
    t.ok(w.status.failsafeKept, 'the fail-safe fence stays until the drain ends');
    t.strictSame(w.status.handedTo, { 'web/www': 'node-b' });
  },
);

t.test(
  "fail-safe with MetalLB's pools known: drops only ARP/NA in the pools (and the VIPs), not every foreign address; Event and status say so",
  async (t) => {
    const pools = ['192.0.2.100-192.0.2.120', '2001:db8::100-2001:db8::1ff'];
    const w = inFailsafe({ pools, ownAddresses: ['192.0.2.1'] });
    const spec = w.o.fence;
    t.strictSame(spec?.pools, pools);
    t.equal(spec?.ownAddresses, undefined, 'not the broad drop');
    t.strictSame(spec?.vips4, []);
    t.strictSame(spec?.held, ['192.0.2.10'], 'the VIP announced here is held until claimed');
    const ev = w.log[0]?.find((a) => a.kind === 'event') as { message: string };
    t.match(ev.message, /MetalLB's address pools 192\.0\.2\.100-192\.0\.2\.120, 2001:db8::100-2001:db8::1ff/);
    t.match(w.status, { failsafeDrop: 'pools', pools, memberlistCut: true });
  },
);

t.test('fail-safe with the pools never known: the broad drop, said in the Event and status', async (t) => {
  const w = inFailsafe({ ownAddresses: ['192.0.2.1'] });
  t.strictSame(w.o.fence?.ownAddresses, ['192.0.2.1']);
  const ev = w.log[0]?.find((a) => a.kind === 'event') as { message: string };
  t.match(ev.message, /MetalLB's address pools never read/);
  t.match(w.status, { failsafeDrop: 'foreign' });
});

t.test(
  'the pools are remembered across a restart (status annotation) and used when the API is down',
  async (t) => {
    const pools = ['192.0.2.100-192.0.2.120'];
    const w = new World(obs({ pools }));
    w.run({ draining: true });
    const status = parseL2State(JSON.stringify(w.status));
    t.strictSame(status?.pools, pools);
    const restarted = new World(
      obs({ draining: true, apiDownSince: T0 - 10_000, otherCandidates: undefined }),
    );
    restarted.memory = resume(status, undefined, T0);
    restarted.run();
    t.strictSame(restarted.o.fence?.pools, pools);
    // And from the fail-safe fence itself (read back from nft) when the annotation is gone.
    t.strictSame(resume(undefined, restarted.o.fence, T0).pools, pools);
  },
);

t.test(
  "after a fail-safe the peers deleted this node's ServiceL2Status (MetalLB 0.16): the VIPs it covered are still handed over and fenced",
  async (t) => {
    const w = inFailsafe();
    w.run({
      now: T0 + 1000,
      apiDownSince: undefined,
      otherCandidates: ['node-b'],
      announced: [],
      newOwners: { 'web/www': 'node-b' },
    });
    w.run({ now: T0 + 1100 });
    t.equal(w.status.phase, 'fenced');
    t.strictSame(w.o.fence?.vips4, ['192.0.2.10'], 'the fail-safe fence still covers it');
    t.strictSame(w.status.vips, ['192.0.2.10']);
    t.strictSame(w.status.handedTo, { 'web/www': 'node-b' });
  },
);

t.test(
  'after a fail-safe the whole fail-safe fence (pool drop and memberlist cut) stays until the drain ends, however long after the label: a peer whose API view lags any time never hears the fenced node again; kept across a restart; uncordon lifts the cut first and the label after memberlist had time to rejoin',
  async (t) => {
    const pools = ['192.0.2.100-192.0.2.120'];
    const w = inFailsafe({ pools });
    const failsafeFence = w.o.fence;
    t.strictSame(failsafeFence?.memberlistPorts, [7946]);
    // The API is back, the label goes on (seen at T0 + 1100); node-b re-elected during the cut.
    w.run({ now: T0 + 1000, apiDownSince: undefined, otherCandidates: ['node-b'] });
    const confirmed = w.run({ now: T0 + 1100, newOwners: { 'web/www': 'node-b' } });
    t.strictSame(events(confirmed), ['L2HandoverConfirmed']);
    t.match(
      String((confirmed.find((x) => x.kind === 'event') as { message?: string } | undefined)?.message),
      /fail-safe fence and memberlist cut kept until the drain ends/,
    );
    for (const dt of [6_100, 10_000, 60_000, 60 * 60_000])
      t.strictSame(kinds(w.run({ now: T0 + dt })), [], `${dt - 1100} ms after the label: nothing changes`);
    t.strictSame(
      w.o.fence,
      (({ held: _held, ...rest }) => ({ ...rest, vips4: ['192.0.2.10'] }))(failsafeFence ?? ({} as never)),
      'the pool drop and the memberlist cut are still installed; the VIP node-b has is dropped outright',
    );
    t.match(w.status, {
      phase: 'fenced',
      memberlistCut: true,
      failsafeDrop: 'pools',
      handedTo: { 'web/www': 'node-b' },
      failsafeKept: /until the drain ends.*a peer whose API view lags/,
    });
    t.equal(w.o.excludeLabel, true, 'the label stays on');
    // A restart reads the state back from the annotation and the nft table: still kept.
    const annotation = parseL2State(JSON.stringify(w.status));
    w.memory = resume(annotation, w.o.fence, T0 + 61 * 60_000);
    t.equal(w.status.phase, 'fenced');
    t.ok(w.status.failsafeKept);
    t.strictSame(kinds(w.run({ now: T0 + 61 * 60_000 + 100 })), [], 'after the restart: nothing re-decided');
    // A second outage changes nothing either.
    t.strictSame(kinds(w.run({ now: T0 + 62 * 60_000, apiDownSince: T0 + 61 * 60_000 })), []);
    w.run({ now: T0 + 62 * 60_000 + 100, apiDownSince: undefined });
    // Uncordon: the fence (and with it the cut) first; the label only once memberlist had time to
    // rejoin, so this node's speaker is never alone and not excluded at once.
    const u = T0 + 63 * 60_000;
    t.strictSame(kinds(w.run({ now: u, draining: false })), ['unfence']);
    t.equal(w.status.phase, 'undoing');
    t.strictSame(kinds(w.run({ now: u + 1_000 })), [], 'label kept while memberlist rejoins');
    t.equal(w.o.excludeLabel, true);
    t.strictSame(kinds(w.run({ now: u + 10_000 })), ['unlabel']);
    t.strictSame(events(w.run({ now: u + 10_100 })), ['L2HandoverUndone']);
    t.equal(w.status.phase, 'idle');
    t.equal(w.o.fence, undefined);
    t.equal(w.o.excludeLabel, false);
  },
);

t.test(
  'no ServiceL2Status to confirm (no CRD, or 0.14.4–0.14.5 without the flag): after a fail-safe the settle time applies, then fenced with the fail-safe fence and cut kept until the drain ends',
  async (t) => {
    const w = inFailsafe({ statusSource: 'services' });
    w.run({ now: T0 + 1000, apiDownSince: undefined, otherCandidates: ['node-b'] });
    w.run({ now: T0 + 1100 });
    const a = w.run({ now: T0 + 11_000 });
    t.strictSame(events(a), ['L2HandoverUnconfirmedFence']);
    t.strictSame(w.o.fence?.vips4, ['192.0.2.10'], 'settled: the VIP held so far is dropped outright');
    t.equal(w.o.fence?.held, undefined);
    t.match(w.status, { phase: 'fenced', memberlistCut: true, failsafeKept: /until the drain ends/ });
    t.strictSame(kinds(w.run({ now: T0 + 60 * 60_000 })), []);
    t.strictSame(kinds(w.run({ now: T0 + 61 * 60_000, draining: false })), ['unfence']);
  },
);

t.test(
  'unconfirmed the grace after the label while API requests failed: the fail-safe fence and memberlist cut (the peers may be blind), then confirmed with the cut kept',
  async (t) => {
    // The seed sequence (issue 23): the label was written through a healthy API server, but the
    // peers' speakers read through the drained node's stale one and never saw it; the sidecar's
    // own API answered again, so the fail-safe's grace never ran out. Before: nothing until the
    // 30 s budget, then given up, the VIP left on the drained node.
    const w = new World(obs());
    w.run({ draining: true, drainReason: 'cordoned' });
    w.run({ now: T0 + 200 });
    t.equal(w.status.phase, 'awaiting-confirmation');
    // A request timed out at +3 s; the API answered again since (not down).
    t.strictSame(w.run({ now: T0 + 3_000, apiFailedAt: T0 + 3_000 }), []);
    t.strictSame(w.run({ now: T0 + 4_900 }), [], 'not before the grace');
    const a = w.run({ now: T0 + 5_000 });
    t.strictSame(kinds(a), ['fence', 'event']);
    const fence = a[0] as Extract<L2Action, { kind: 'fence' }>;
    t.strictSame(fence.spec.memberlistPorts, [7946], 'memberlist cut');
    t.strictSame(events(a), ['L2FailsafeFence']);
    t.match(
      (a[1] as { message: string }).message,
      /no other node confirmed 192\.0\.2\.10 5(\.0)? s after the exclude label, and API requests failed meanwhile \(the last 2(\.0)? s ago\): the peers may read through a stale API server and never see the label: fenced .* and cut memberlist ports 7946/,
    );
    t.equal(w.status.phase, 'failsafe-fenced');
    // The API answers: decided again, the fail-safe fence kept meanwhile; a peer re-elected over
    // memberlist confirms: fenced, the whole fail-safe fence kept until the drain ends.
    w.run({ now: T0 + 5_100 });
    w.run({ now: T0 + 5_200 });
    const c = w.run({ now: T0 + 15_000, newOwners: { 'web/www': 'node-b' } });
    t.strictSame(events(c), ['L2HandoverConfirmed']);
    t.equal(w.status.phase, 'fenced');
    t.strictSame(w.o.fence?.memberlistPorts, [7946], 'cut kept');
    t.strictSame(w.run({ now: T0 + 60_000 }), [], 'no second fail-safe');
  },
);

t.test(
  'blind peers, the own speaker withdrawn: the fail-safe 1 s after it stopped announcing, not the whole grace',
  async (t) => {
    // bench-seed run 5, member removed at the cordon: the drained node's speaker saw the label and
    // withdrew at once; the peers, reading through the stale API server, never saw it. Nobody
    // answered until the blind-peers fail-safe 5 s after the label and the peers' memberlist
    // failure detection after it: dark 9.85 s. Before: no fail-safe before T0 + 5 s.
    const w = new World(obs());
    w.run({ draining: true, drainReason: 'cordoned' });
    w.run({ now: T0 + 200, apiFailedAt: T0 + 100 });
    t.equal(w.status.phase, 'awaiting-confirmation');
    t.strictSame(w.run({ now: T0 + 1_000, announced: [] }), [], 'withdrawn: a takeover may still show');
    t.strictSame(w.run({ now: T0 + 1_900 }), []);
    const a = w.run({ now: T0 + 2_000 });
    t.strictSame(events(a), ['L2FailsafeFence']);
    t.strictSame(
      (a[0] as Extract<L2Action, { kind: 'fence' }>).spec.memberlistPorts,
      [7946],
      'memberlist cut',
    );
    t.match(
      (a[1] as { message: string }).message,
      /this node's speaker stopped announcing them 1(\.0)? s ago/,
    );
    t.equal(w.status.phase, 'failsafe-fenced');

    // The candidates not known now (their watches fail on the same stale server): the handover
    // started because others could announce, so the fail-safe is not held back (run 6: 3–4 s late).
    const unknown = new World(obs());
    unknown.run({ draining: true });
    unknown.run({ now: T0 + 200, apiFailedAt: T0 + 100, announced: [] });
    t.strictSame(events(unknown.run({ now: T0 + 1_200, otherCandidates: undefined })), ['L2FailsafeFence']);
    const none = new World(obs());
    none.run({ draining: true });
    none.run({ now: T0 + 200, apiFailedAt: T0 + 100, announced: [], otherCandidates: [] });
    t.notOk(events(none.run({ now: T0 + 6_000 })).includes('L2FailsafeFence'), 'known: nobody else');

    // Withdrawn, but no request failed: the watch is trusted, nothing before the budget.
    const healthy = new World(obs());
    healthy.run({ draining: true });
    healthy.run({ now: T0 + 200, announced: [] });
    t.strictSame(healthy.run({ now: T0 + 3_000 }), []);
    t.strictSame(healthy.run({ now: T0 + 6_000 }), []);
    t.equal(healthy.status.phase, 'awaiting-confirmation');

    // Withdrawn and confirmed within the second: fenced as usual, no fail-safe.
    const quick = new World(obs());
    quick.run({ draining: true });
    quick.run({ now: T0 + 200, apiFailedAt: T0 + 100, announced: [] });
    t.strictSame(events(quick.run({ now: T0 + 900, newOwners: { 'web/www': 'node-b' } })), [
      'L2HandoverDone',
    ]);

    // Announcing again (the speaker came back) resets the wait.
    const back = new World(obs());
    back.run({ draining: true });
    back.run({ now: T0 + 200, apiFailedAt: T0 + 100, announced: [] });
    back.run({ now: T0 + 900, announced: obs().announced });
    back.run({ now: T0 + 1_000, announced: [] });
    t.strictSame(back.run({ now: T0 + 1_900 }), [], 'withdrawn again 0.9 s ago');
    t.strictSame(events(back.run({ now: T0 + 2_000 })), ['L2FailsafeFence']);
  },
);

t.test(
  'no escalation without failed requests since the label, without ServiceL2Status, or with no other candidate',
  async (t) => {
    const quiet = new World(obs());
    quiet.run({ draining: true });
    quiet.run({ now: T0 + 200, apiFailedAt: T0 - 5_001 }); // failed well before the handover began
    t.strictSame(quiet.run({ now: T0 + 5_000 }), []);
    t.strictSame(quiet.run({ now: T0 + 10_000 }), []);
    t.equal(quiet.status.phase, 'awaiting-confirmation');
    // A failure while the handover was being prepared (its reads hung on a stale server) counts.
    const preparing = new World(obs());
    preparing.run({ draining: true });
    preparing.run({ now: T0 + 200, apiFailedAt: T0 - 100 });
    t.strictSame(events(preparing.run({ now: T0 + 5_000 })), ['L2FailsafeFence']);
    const noStatus = new World(obs({ statusSource: 'services' }));
    noStatus.run({ draining: true });
    noStatus.run({ now: T0 + 200, apiFailedAt: T0 + 100 });
    const a = noStatus.run({ now: T0 + 10_000 });
    t.strictSame(events(a), ['L2HandoverUnconfirmedFence'], 'the settle-time fence, no cut');
    t.strictSame(noStatus.o.fence?.memberlistPorts, []);
  },
);

t.test('consistent status reads: awaiting confirmation after API failures, once a second', async (t) => {
  const settings = { failsafeGraceMs: 5_000 };
  const awaiting = { phase: 'awaiting-confirmation' as const, handoverStartedAt: T0, attemptStartedAt: T0 };
  const never = Number.NEGATIVE_INFINITY;
  t.ok(statusReadDue(awaiting, T0 + 100, T0 + 200, never, settings), 'failed since the label');
  t.ok(statusReadDue(awaiting, T0 - 4_000, T0 + 200, never, settings), 'failed while it was prepared');
  t.notOk(statusReadDue(awaiting, T0 - 5_001, T0 + 200, never, settings), 'failed well before');
  t.notOk(
    statusReadDue(awaiting, undefined, T0 + 200, never, settings),
    'nothing failed: the watch is trusted',
  );
  t.notOk(statusReadDue(awaiting, T0 + 100, T0 + 1_200, T0 + 300, settings), 'read 0.9 s ago');
  t.ok(statusReadDue(awaiting, T0 + 100, T0 + 1_300, T0 + 300, settings), 'read 1 s ago');
  for (const phase of ['idle', 'labelled', 'fenced-confirmed', 'failsafe-fenced'] as const)
    t.notOk(statusReadDue({ ...awaiting, phase }, T0 + 100, T0 + 200, never, settings), phase);
});

t.test(
  'looking for a stale API server: every grace once unconfirmed that long, every second once withdrawn',
  async (t) => {
    const settings = { failsafeGraceMs: 5_000 };
    const awaiting = { phase: 'awaiting-confirmation' as const, handoverStartedAt: T0, attemptStartedAt: T0 };
    t.notOk(staleServerCheckDue(awaiting, T0 + 4_900, 0, settings), 'within the grace');
    t.ok(staleServerCheckDue(awaiting, T0 + 5_000, 0, settings), 'the grace passed');
    t.notOk(staleServerCheckDue(awaiting, T0 + 9_000, T0 + 5_000, settings), 'checked 4 s ago');
    t.ok(staleServerCheckDue(awaiting, T0 + 10_000, T0 + 5_000, settings));
    // bench-seed run 6: the own speaker withdrew at once, the peers blind; the first failure came 8 s
    // after the label. Before: no check before the grace.
    const withdrawn = { ...awaiting, ownWithdrawnAt: T0 + 100 };
    t.notOk(staleServerCheckDue(withdrawn, T0 + 1_000, 0, settings), 'withdrawn 0.9 s ago');
    t.ok(staleServerCheckDue(withdrawn, T0 + 1_100, 0, settings), 'withdrawn 1 s ago');
    t.notOk(staleServerCheckDue(withdrawn, T0 + 1_900, T0 + 1_100, settings), 'checked 0.8 s ago');
    t.ok(staleServerCheckDue(withdrawn, T0 + 2_100, T0 + 1_100, settings), 'again a second later');
    t.notOk(staleServerCheckDue({ ...withdrawn, phase: 'fenced-confirmed' }, T0 + 2_100, 0, settings));
  },
);

// --- seed 79 trial 20: a pod going away is fenced by the fail-safe without the memberlist cut ---

t.test(
  'fail-safe while the pod goes away (seed 79 trial 20): fenced, memberlist not cut, so the exiting speaker’s leave reaches its peers',
  async (t) => {
    // The speaker pod deleted with its node's path to the API dropped: the hook arrived, nothing
    // could be labelled, the grace passed.
    const w = new World(obs({ terminating: true, apiDownSince: T0, otherCandidates: undefined }));
    t.strictSame(kinds(w.run()), [], 'within the grace: nothing yet');
    const a = w.run({ now: T0 + 5_000 });
    t.strictSame(kinds(a), ['fence', 'event']);
    t.strictSame(w.o.fence?.memberlistPorts, [], 'no cut: it would drop the leave');
    t.strictSame(w.o.fence?.held, ['192.0.2.10'], 'the VIP held until another node claims it');
    t.match((a[1] as { message: string }).message, /left memberlist uncut: the pod is going away/);
    t.equal(w.status.phase, 'failsafe-fenced');
    t.ok(settled(w.memory), 'the hook returns: the speaker gets its SIGTERM and leaves');
    t.strictSame(kinds(w.run({ now: T0 + 6_000 })), [], 'steady: nothing re-applied');
  },
);

t.test('fail-safe while draining (the pod stays): the fence cuts memberlist as before', async (t) => {
  const w = inFailsafe();
  t.strictSame(w.o.fence?.memberlistPorts, [7946]);
});

t.test(
  'fenced uncut for a pod going away that stays after all (a restart, the own Pod unreadable at the hook): cut once it stays',
  async (t) => {
    const w = new World(obs({ terminating: true, apiDownSince: T0, otherCandidates: undefined }));
    w.run({ now: T0 + 5_000 });
    t.strictSame(w.o.fence?.memberlistPorts, []);
    // The new container runs: no longer going away, the guarded stop keeps it draining.
    const a = w.run({
      now: T0 + 7_000,
      terminating: false,
      draining: true,
      drainReason: 'container restarted',
    });
    t.strictSame(kinds(a), ['event', 'fence']);
    t.strictSame(w.o.fence?.memberlistPorts, [7946], 'the new speaker cannot rejoin behind the fence');
    t.strictSame(w.o.fence?.held, ['192.0.2.10']);
    t.match((a[0] as { message: string }).message, /the pod stays .* memberlist ports 7946 cut now/);
    t.strictSame(kinds(w.run({ now: T0 + 8_000 })), [], 'once');
  },
);

t.test(
  'a pod going away right after the sidecar started: labelled at once, but nothing concluded before MetalLB’s view has arrived',
  async (t) => {
    // The Node view unsynced too (terminating acts without it); ServiceL2Status not listed yet:
    // nothing looks announced here.
    const w = new World(obs({ synced: false, metallbSynced: false, announced: [] }));
    t.strictSame(kinds(w.run({ terminating: true })), ['label', 'event'], 'the label: the safe move');
    t.strictSame(kinds(w.run({ now: T0 + 100 })), [], 'nothing concluded from a view not listed');
    t.notOk(settled(w.memory), 'the hook keeps waiting');
    // The list arrives: this node announces www, and node-b has taken it.
    w.run({ now: T0 + 300, metallbSynced: true, announced: [svc], newOwners: { 'web/www': 'node-b' } });
    t.strictSame(w.status.vips, ['192.0.2.10'], 'the VIP it announces is handed over');
    t.ok(settled(w.memory));
  },
);

t.test(
  'cordoned while it is not known whether MetalLB has ServiceL2Status (robustness seed 81 trial 70): labelled at once',
  async (t) => {
    // The CRD check failed at the sidecar's start (429s); an API restart follows the cordon.
    const w = new World(obs({ statusSource: 'unknown', metallbSynced: false, announced: [] }));
    t.strictSame(kinds(w.run({ draining: true })), ['label', 'event'], 'peers re-elect on the label');
    t.strictSame(kinds(w.run({ now: T0 + 100 })), [], 'and wait for the view to confirm');
    t.notOk(settled(w.memory));
  },
);

t.test(
  'a restart hook right after the sidecar started: labelled before MetalLB’s view was listed, nothing is concluded until it is (no "handed over nothing")',
  async (t) => {
    // Labelled while it was not known whether ServiceL2Status is installed (an older decision, or
    // a resumed one); then the CRD is known but its list has not arrived: nothing looks announced.
    const w = new World(obs({ draining: true, statusSource: 'unknown', announced: [] }));
    w.memory = { ...initialMemory(T0), phase: 'awaiting-confirmation', handoverStartedAt: T0, services: [] };
    w.o = { ...w.o, excludeLabel: true, labelOwned: true };
    t.strictSame(kinds(w.run({ now: T0 + 100, statusSource: 'servicel2status', metallbSynced: false })), []);
    t.notOk(settled(w.memory), 'not done: the VIPs announced here are not known yet');
    // Listed: www is announced here, and node-b has taken it.
    const a = w.run({
      now: T0 + 400,
      metallbSynced: true,
      announced: [svc],
      newOwners: { 'web/www': 'node-b' },
    });
    t.ok(kinds(a).includes('fence'), JSON.stringify(kinds(a)));
    t.strictSame(w.status.vips, ['192.0.2.10']);
  },
);

t.test(
  'issue 42 item 8: a sidecar restarted during or after an API outage keeps its own label SPEAKER_CATCH_UP_MAX_MS after its start, or after the API answers again (robustness seed 112 trial 55: dual 3.17 s)',
  async (t) => {
    /** Fenced after a confirmed handover; the sidecar then restarts at `at` and resumes. */
    const fencedThenRestarted = (at: number) => {
      const w = new World(obs());
      w.run({ draining: true, drainReason: 'cordoned' });
      w.run({ now: T0 + 100 });
      w.run({ now: T0 + 200, newOwners: { 'web/www': 'node-b' } });
      t.equal(w.status.phase, 'fenced');
      // What survives the restart: the annotation written before the outage, and nft.
      w.memory = resume(parseL2State(JSON.stringify(w.status)), w.o.fence, at, true);
      return w;
    };
    // The outage ended before the restart: the new process never sees it. Its speaker, in its
    // watches' backoff, may not see the label go for up to 30 s.
    const after = fencedThenRestarted(T0 + 60_000);
    t.strictSame(kinds(after.run({ now: T0 + 61_000, draining: false, drainReason: undefined })), [
      'unfence',
    ]);
    t.strictSame(kinds(after.run({ now: T0 + 61_100 })), [], 'the label stays');
    t.ok(needsTick(after.memory, after.o), 'the edge ticks while the label is held');
    t.strictSame(kinds(after.run({ now: T0 + 60_000 + 30_000 - 1 })), [], 'until 30 s after the start');
    t.strictSame(kinds(after.run({ now: T0 + 60_000 + 30_000 })), ['unlabel']);

    // Restarted during the outage (its own view: down from its start, 10 s): 30 s from the
    // API's answer, not twice the part of the outage this process saw.
    const during = fencedThenRestarted(T0 + 60_000);
    during.run({ now: T0 + 60_000, apiDownSince: T0 + 60_000, synced: false });
    t.strictSame(kinds(during.run({ now: T0 + 65_000, draining: false, drainReason: undefined })), []);
    const back = T0 + 70_000;
    t.strictSame(kinds(during.run({ now: back, apiDownSince: undefined, synced: true })), ['unfence']);
    t.strictSame(kinds(during.run({ now: back + 2 * 10_000 })), [], 'not twice what it saw');
    t.strictSame(kinds(during.run({ now: back + 30_000 - 1 })), []);
    t.strictSame(kinds(during.run({ now: back + 30_000 })), ['unlabel']);

    // A drain that ends 30 s or more after the restart, the API up since: at once.
    const late = fencedThenRestarted(T0 + 60_000);
    t.strictSame(kinds(late.run({ now: T0 + 90_000, draining: false, drainReason: undefined })), ['unfence']);
    t.strictSame(kinds(late.run({ now: T0 + 90_100 })), ['unlabel']);

    // Resumed without its own label on the Node (read at the start): nothing to hold, no outage assumed.
    t.equal(resume(undefined, undefined, T0, false).apiOutage, undefined);
    t.ok(resume(undefined, undefined, T0).apiOutage, 'the own Node unreadable: as if found');
  },
);

t.test(
  'issue 42 item 5: the exclude label removed under the fence is put back at once, with a Warning Event, and an Event when it is back',
  async (t) => {
    const w = new World(obs());
    w.run({ draining: true, drainReason: 'cordoned' });
    w.run({ now: T0 + 100 });
    w.run({ now: T0 + 200, announced: [], newOwners: { 'web/www': 'node-b' } });
    t.equal(w.status.phase, 'fenced');
    const fenced = w.o.fence;

    // A user or a label-reconciling tool removes the label: MetalLB may elect this node again,
    // behind its own fence (dark until the uncordon).
    const missing = { excludeLabel: false, labelOwned: false };
    const gone = w.run({ now: T0 + 10_000, ...missing });
    t.strictSame(kinds(gone), ['label', 'event']);
    const warning = gone[1] as Extract<L2Action, { kind: 'event' }>;
    t.equal(warning.type, 'Warning');
    t.equal(warning.reason, 'L2ExcludeLabelRemoved');
    t.match(warning.message, /exclude label .* removed from node node-a under the fence .* put back/);
    t.equal(w.status.phase, 'fenced', 'still fenced');
    // Asked again on every reconcile until the label is seen (the put-back not landed yet); one Event.
    t.strictSame(kinds(w.run({ now: T0 + 10_100, ...missing })), ['label']);
    const down = { ...missing, apiDownSince: T0 + 10_150 };
    t.strictSame(kinds(w.run({ now: T0 + 10_200, ...down })), [], 'not while the API is down');
    const unsynced = { ...missing, synced: false, apiDownSince: undefined };
    t.strictSame(kinds(w.run({ now: T0 + 10_300, ...unsynced })), [], 'nor unsynced');
    const restored = w.run({ now: T0 + 10_400, synced: true, excludeLabel: true, labelOwned: true });
    t.strictSame(events(restored), ['L2ExcludeLabelRestored']);
    t.strictSame(kinds(restored), ['event'], 'the fence untouched');
    t.strictSame(w.o.fence, fenced);
    t.strictSame(kinds(w.run({ now: T0 + 11_000 })), []);
    // A second removal is a new episode.
    t.strictSame(kinds(w.run({ now: T0 + 20_000, excludeLabel: false, labelOwned: false })), [
      'label',
      'event',
    ]);
  },
);

t.test(
  'issue 42 item 10: a fail-safe fenced for a hook taken for a deletion (the own Pod unreadable) is lifted at once when that hook proves a restart, the API still down',
  async (t) => {
    // The sidecar's requests answered 429 (down for it); the owner's speaker fails its liveness
    // probe; the hook cannot read the own Pod and presumes a deletion; the grace passes.
    const w = new World(obs({ terminating: true, apiDownSince: T0, otherCandidates: undefined }));
    w.run({ now: T0 + 5_000 });
    t.equal(w.status.phase, 'failsafe-fenced');
    t.strictSame(w.o.fence?.memberlistPorts, [], 'uncut: peers keep this node the owner');
    // The restart is seen in the shared PID namespace: not terminating, and not draining.
    const lifted = w.run({ now: T0 + 6_200, terminating: false, hookRestartSeen: true });
    t.strictSame(kinds(lifted), ['unfence'], 'the restarted speaker, still the owner, answers again');
    t.equal(w.status.phase, 'undoing');
    t.strictSame(kinds(w.run({ now: T0 + 6_300 })), ['event']);
    t.equal(w.status.phase, 'idle');
    t.strictSame(kinds(w.run({ now: T0 + 7_000 })), [], 'no fail-safe again: nothing to hand over');
    // Without that proof, an unknown drain state keeps the fail-safe until the API answers.
    const unproved = new World(obs({ terminating: true, apiDownSince: T0, otherCandidates: undefined }));
    unproved.run({ now: T0 + 5_000 });
    t.strictSame(kinds(unproved.run({ now: T0 + 6_200, terminating: false })), []);
    t.equal(unproved.status.phase, 'failsafe-fenced');
  },
);
