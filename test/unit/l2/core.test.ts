import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Node, Pod } from '../../../shared/kube/types.ts';
import {
  EXCLUDE_LABEL,
  initialMemory,
  type L2Action,
  type L2Memory,
  type L2Observation,
  type L2Settings,
  otherCandidates,
  parseStatus,
  resume,
  settled,
  statusOf,
  step,
} from '../../../sidecar/l2/core.ts';

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
    crd: true,
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
  mem: L2Memory = initialMemory(T0);
  o: L2Observation;
  log: L2Action[][] = [];
  constructor(o: L2Observation) {
    this.o = o;
  }
  run(over: Partial<L2Observation> = {}): L2Action[] {
    this.o = { ...this.o, ...over };
    const { mem, actions } = step(this.mem, this.o, cfg);
    this.mem = mem;
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

test('cordon: label, wait for another node to confirm, then fence; nothing before confirmation', () => {
  const w = new World(obs());
  assert.deepEqual(w.run(), []);
  const a1 = w.run({ draining: true, drainReason: 'cordoned' });
  assert.deepEqual(kinds(a1), ['label', 'event']);
  assert.equal(w.mem.phase, 'labelled');
  assert.deepEqual(w.run({ now: T0 + 200 }), []);
  assert.equal(w.mem.phase, 'awaiting-confirmation');
  // The own ServiceL2Status lingers (MetalLB < 0.16): its presence or absence proves nothing.
  assert.deepEqual(w.run({ now: T0 + 400, announced: [] }), []);
  const a2 = w.run({ now: T0 + 800, newOwners: { 'web/www': 'node-b' } });
  assert.deepEqual(kinds(a2), ['fence', 'event']);
  const fence = a2[0] as Extract<L2Action, { kind: 'fence' }>;
  assert.deepEqual(fence.spec, {
    vips4: ['192.0.2.10'],
    vips6: [],
    interfaces: ['eth0'],
    memberlistPorts: [],
  });
  const ev = a2[1] as Extract<L2Action, { kind: 'event' }>;
  assert.match(ev.message, /VIP 192\.0\.2\.10 handed to node-b in 0\.8 s; fence installed on eth0/);
  assert.equal(w.mem.phase, 'fenced');
  assert.ok(settled(w.mem));
  // Steady state: no repeated fence, no repeated events.
  assert.deepEqual(w.run({ now: T0 + 5_000 }), []);
});

test('a confirmation for only some services does not fence', () => {
  const two = [svc, { service: 'web/api', ips: ['192.0.2.11'] }];
  const w = new World(obs({ announced: two }));
  w.run({ draining: true });
  w.run({ now: T0 + 100 });
  assert.deepEqual(w.run({ now: T0 + 200, newOwners: { 'web/www': 'node-b' } }), []);
  const a = w.run({ now: T0 + 300, newOwners: { 'web/www': 'node-b', 'web/api': 'node-c' } });
  assert.deepEqual(kinds(a), ['fence', 'event']);
  assert.match((a[1] as { message: string }).message, /192\.0\.2\.11 handed to node-c/);
});

test('budget spent unconfirmed while draining: the label comes off (this node announces again), never a fence, not retried until the drain ends', () => {
  const w = new World(obs());
  w.run({ draining: true, drainReason: 'cordoned' });
  w.run({ now: T0 + 100 });
  assert.equal(w.o.excludeLabel, true);
  const a = w.run({ now: T0 + 30_001 });
  assert.deepEqual(kinds(a), ['unlabel', 'event']);
  assert.deepEqual(events(a), ['L2HandoverUnconfirmed']);
  assert.match((a[1] as { message: string }).message, /exclude label removed so this node announces again/);
  assert.equal(w.o.excludeLabel, false);
  assert.equal(w.mem.phase, 'idle');
  assert.ok(w.mem.gaveUp);
  assert.equal(statusOf(w.mem, false).gaveUp, true);
  // Still cordoned: no new label, no fence, even when a confirmation shows up late.
  assert.deepEqual(w.run({ now: T0 + 40_000, newOwners: { 'web/www': 'node-c' } }), []);
  assert.equal(w.o.fence, undefined);
  // Someone put the label back on while given up (a failed removal, say): it comes off again.
  w.o = { ...w.o, excludeLabel: true, labelOwned: true };
  assert.deepEqual(kinds(w.run({ now: T0 + 41_000 })), ['unlabel']);
  // A restart keeps the decision.
  assert.equal(
    resume(parseStatus(JSON.stringify(statusOf(w.mem, false))), undefined, T0 + 42_000).gaveUp,
    true,
  );
  // The pod going away after all (deleted during the drain): a new attempt, label kept this time.
  const going = structuredClone(w);
  Object.setPrototypeOf(going, World.prototype);
  assert.deepEqual(kinds(going.run({ now: T0 + 45_000, terminating: true })), ['label', 'event']);
  assert.equal(going.mem.gaveUp, false);
  assert.equal(settled(going.mem), false, '/prestop waits for the new attempt');
  // Uncordon ends it; the next cordon is a new handover.
  assert.deepEqual(w.run({ now: T0 + 50_000, draining: false, newOwners: {} }), []);
  assert.equal(w.mem.gaveUp, false);
  assert.deepEqual(kinds(w.run({ now: T0 + 60_000, draining: true })), ['label', 'event']);
});

test('budget spent unconfirmed while the pod terminates: warn once, keep the label, a late confirmation still fences', () => {
  const w = new World(obs());
  w.run({ terminating: true });
  w.run({ now: T0 + 100 });
  const a = w.run({ now: T0 + 30_001 });
  assert.deepEqual(kinds(a), ['event']);
  assert.deepEqual(events(a), ['L2HandoverUnconfirmed']);
  assert.deepEqual(w.run({ now: T0 + 31_000 }), []);
  assert.equal(w.o.excludeLabel, true);
  assert.equal(w.o.fence, undefined);
  assert.deepEqual(kinds(w.run({ now: T0 + 40_000, newOwners: { 'web/www': 'node-c' } })), [
    'fence',
    'event',
  ]);
});

test("a pre-existing exclude label (not drainguard's) stays when the handover is given up", () => {
  const w = new World(obs({ excludeLabel: true, labelOwned: false }));
  w.run({ draining: true });
  w.run({ now: T0 + 100 });
  const a = w.run({ now: T0 + 30_001 });
  assert.deepEqual(kinds(a), ['event']);
  assert.match((a[0] as { message: string }).message, /not added by drainguard: left in place/);
  assert.equal(w.o.excludeLabel, true);
});

test('two nodes cordoned at once counted each other: the re-check after the label takes it back, no fence', () => {
  const w = new World(obs({ otherCandidates: ['node-b'] }));
  assert.deepEqual(kinds(w.run({ draining: true })), ['label', 'event']);
  // node-b was cordoned and labelled meanwhile: nobody else could announce.
  const a = w.run({ now: T0 + 2_000, otherCandidates: [] });
  assert.deepEqual(kinds(a), ['unlabel', 'event']);
  assert.deepEqual(events(a), ['L2HandoverImpossible']);
  assert.equal(w.o.excludeLabel, false);
  assert.ok(w.mem.stranded && w.mem.phase === 'idle');
  assert.equal(w.o.fence, undefined);
  // A late status of node-b changes nothing while nobody else could announce.
  assert.deepEqual(w.run({ now: T0 + 3_000, newOwners: { 'web/www': 'node-b' } }), []);
});

test('never strand a VIP: no other candidate means no label and no fence, said once', () => {
  const w = new World(obs({ otherCandidates: [] }));
  const a = w.run({ draining: true });
  assert.deepEqual(events(a), ['L2HandoverImpossible']);
  assert.deepEqual(kinds(a), ['event']);
  assert.ok(w.mem.stranded && settled(w.mem));
  assert.deepEqual(w.run({ now: T0 + 1000 }), []);
  // A node becomes available: the handover starts.
  assert.deepEqual(kinds(w.run({ now: T0 + 2000, otherCandidates: ['node-b'] })), ['label', 'event']);
});

test('unknown candidates (not listed yet) wait instead of guessing', () => {
  const w = new World(obs({ otherCandidates: undefined }));
  assert.deepEqual(w.run({ draining: true }), []);
  assert.equal(w.mem.phase, 'idle');
});

test('uncordon: fence removed first, then the label drainguard added', () => {
  const w = new World(obs());
  w.run({ draining: true });
  w.run({ now: T0 + 100, newOwners: { 'web/www': 'node-b' } });
  w.run({ now: T0 + 200 });
  assert.equal(w.mem.phase, 'fenced');
  assert.deepEqual(kinds(w.run({ now: T0 + 300, draining: false })), ['unfence']);
  assert.equal(w.mem.phase, 'undoing');
  assert.deepEqual(kinds(w.run({ now: T0 + 400 })), ['unlabel']);
  assert.deepEqual(events(w.run({ now: T0 + 500 })), ['L2HandoverUndone']);
  assert.equal(w.mem.phase, 'idle');
  assert.deepEqual(w.run({ now: T0 + 600 }), []);
});

test('a pre-existing exclude label (kubeadm control plane) is kept on uncordon', () => {
  const w = new World(obs({ excludeLabel: true, labelOwned: false }));
  const a = w.run({ draining: true });
  assert.deepEqual(kinds(a), ['event'], 'no label action: it is already there');
  w.run({ now: T0 + 100, newOwners: { 'web/www': 'node-b' } });
  w.run({ now: T0 + 200, draining: false });
  const rest = [w.run({ now: T0 + 300 }), w.run({ now: T0 + 400 })].flat();
  assert.ok(!kinds(rest).includes('unlabel'));
  assert.equal(w.o.excludeLabel, true);
  assert.equal(w.mem.phase, 'idle');
});

test('fail-safe: API down while draining fences after the grace and cuts memberlist; undone when API is back', () => {
  const w = new World(obs({ draining: true }));
  w.run();
  w.run({ now: T0 + 100 });
  assert.equal(w.mem.phase, 'awaiting-confirmation');
  assert.deepEqual(w.run({ now: T0 + 1000, apiDownSince: T0 + 500 }), []);
  assert.deepEqual(w.run({ now: T0 + 5_400, apiDownSince: T0 + 500 }), []);
  const a = w.run({ now: T0 + 5_500, apiDownSince: T0 + 500 });
  assert.deepEqual(kinds(a), ['fence', 'event']);
  assert.deepEqual((a[0] as Extract<L2Action, { kind: 'fence' }>).spec.memberlistPorts, [7946]);
  assert.equal((a[1] as { type: string }).type, 'Warning');
  assert.equal(w.mem.phase, 'failsafe-fenced');
  // Uncordoned while the API is still down: unknowable, so the fail-safe stays.
  assert.deepEqual(w.run({ now: T0 + 6_000, draining: false }), []);
  assert.deepEqual(kinds(w.run({ now: T0 + 7_000, apiDownSince: undefined })), ['unfence']);
  assert.deepEqual(kinds(w.run({ now: T0 + 7_100 })), ['unlabel']);
});

test('fail-safe fence covers every foreign ARP/NA when the own addresses are known (the cut-off speaker announces every VIP)', () => {
  const own = ['192.0.2.1', 'fe80::1'];
  const w = new World(
    obs({ draining: true, apiDownSince: T0 - 10_000, otherCandidates: undefined, ownAddresses: own }),
  );
  const a = w.run();
  const fence = a[0] as Extract<L2Action, { kind: 'fence' }>;
  assert.equal(fence.kind, 'fence');
  assert.deepEqual(fence.spec.ownAddresses, own);
  assert.deepEqual(fence.spec.memberlistPorts, [7946]);
  assert.match(
    (a[1] as { message: string }).message,
    /every ARP\/NA not from this node's own addresses \(VIPs announced here: 192\.0\.2\.10\)/,
  );
  // Confirmed once the API is back: the fence narrows to the VIPs handed over.
  w.run({ now: T0 + 1000, apiDownSince: undefined, ownAddresses: undefined });
  const done = w.run({ now: T0 + 1100, newOwners: { 'web/www': 'node-b' } });
  const narrowed = done[0] as Extract<L2Action, { kind: 'fence' }>;
  assert.equal(narrowed.spec.ownAddresses, undefined);
  assert.deepEqual(narrowed.spec.vips4, ['192.0.2.10']);
});

test('per service: a service no other node may announce blocks the label; the Event names it', () => {
  const local = { service: 'web/local', ips: ['192.0.2.20'] };
  const w = new World(
    obs({ announced: [svc, local], serviceCandidates: { 'web/www': ['node-b', 'node-c'], 'web/local': [] } }),
  );
  const a = w.run({ draining: true, drainReason: 'cordoned' });
  assert.deepEqual(kinds(a), ['event']);
  assert.deepEqual(events(a), ['L2HandoverImpossible']);
  assert.match((a[0] as { message: string }).message, /web\/local \(192\.0\.2\.20\)/);
  assert.doesNotMatch((a[0] as { message: string }).message, /web\/www/);
  assert.ok(w.mem.stranded);
  // Its endpoint moved to node-c: now the handover starts.
  const b = w.run({
    now: T0 + 2_000,
    serviceCandidates: { 'web/www': ['node-b', 'node-c'], 'web/local': ['node-c'] },
  });
  assert.deepEqual(kinds(b), ['label', 'event']);
});

test('per service: eligibility lost after the label takes the label back', () => {
  const w = new World(obs({ serviceCandidates: { 'web/www': ['node-b'] } }));
  w.run({ draining: true, drainReason: 'cordoned' });
  assert.equal(w.o.excludeLabel, true);
  const a = w.run({ now: T0 + 500, serviceCandidates: { 'web/www': [] } });
  assert.deepEqual(kinds(a), ['unlabel', 'event']);
  assert.deepEqual(events(a), ['L2HandoverImpossible']);
  assert.equal(w.mem.phase, 'idle');
  assert.ok(w.mem.stranded);
});

test('fail-safe with the API back while still draining: confirmed handover lifts the memberlist cut', () => {
  const w = new World(obs({ draining: true, apiDownSince: T0 - 10_000, otherCandidates: undefined }));
  const a = w.run();
  assert.deepEqual(kinds(a), ['fence', 'event']);
  assert.equal(w.mem.phase, 'failsafe-fenced');
  const back = w.run({ now: T0 + 1000, apiDownSince: undefined });
  assert.deepEqual(kinds(back), ['label']);
  const done = w.run({ now: T0 + 1100, newOwners: { 'web/www': 'node-b' } });
  assert.deepEqual(kinds(done), ['fence', 'event']);
  assert.deepEqual((done[0] as Extract<L2Action, { kind: 'fence' }>).spec.memberlistPorts, []);
  assert.equal(w.mem.phase, 'fenced');
});

test('fail-safe is not used on a known single-speaker cluster', () => {
  const w = new World(obs({ draining: true, apiDownSince: T0 - 10_000, otherCandidates: [] }));
  assert.ok(!kinds(w.run()).includes('fence'));
});

test('without the ServiceL2Status CRD the fence waits the settle time, unconfirmed', () => {
  const w = new World(obs({ crd: false }));
  w.run({ draining: true });
  assert.deepEqual(w.run({ now: T0 + 9_000 }), []);
  const a = w.run({ now: T0 + 10_000 });
  assert.deepEqual(kinds(a), ['fence', 'event']);
  assert.deepEqual(events(a), ['L2HandoverUnconfirmedFence']);
});

test('terminating pod triggers the handover too', () => {
  const w = new World(obs());
  assert.deepEqual(kinds(w.run({ terminating: true })), ['label', 'event']);
});

test('restart mid-handover: resumes from annotation and nft without a second fence', () => {
  const w = new World(obs({ draining: true }));
  w.run();
  w.run({ now: T0 + 100, newOwners: { 'web/www': 'node-b' } });
  const status = JSON.stringify(statusOf(w.mem, false));
  // "Restart": memory rebuilt from the annotation and the installed fence.
  const mem = resume(parseStatus(status), w.o.fence, T0 + 10_000);
  assert.equal(mem.phase, 'fenced');
  const { actions } = step(mem, { ...w.o, now: T0 + 10_000 }, cfg);
  assert.deepEqual(actions, []);
  // Killed after labelling, before confirmation: continues waiting, does not relabel.
  const w2 = new World(obs({ draining: true }));
  w2.run();
  const mid = resume(parseStatus(JSON.stringify(statusOf(w2.mem, false))), undefined, T0 + 500);
  assert.equal(mid.phase, 'labelled');
  const r = step(mid, { ...w2.o, now: T0 + 600 }, cfg);
  assert.deepEqual(r.actions, []);
  assert.equal(r.mem.phase, 'awaiting-confirmation');
  // A fence left by the fail-safe resumes as such.
  assert.equal(
    resume(undefined, { vips4: ['192.0.2.10'], vips6: [], interfaces: ['eth0'], memberlistPorts: [7946] }, T0)
      .phase,
    'failsafe-fenced',
  );
  assert.equal(parseStatus('{"phase":"bogus"}'), undefined);
  assert.equal(parseStatus('not json'), undefined);
});

test('restart after uncordon: leftovers (fence, own label) are undone', () => {
  const w = new World(
    obs({
      excludeLabel: true,
      labelOwned: true,
      fence: { vips4: ['192.0.2.10'], vips6: [], interfaces: ['eth0'], memberlistPorts: [] },
    }),
  );
  assert.deepEqual(kinds(w.run()), ['unfence']);
  assert.deepEqual(kinds(w.run()), ['unlabel']);
});

test('restart while fenced during an API outage: nothing is undone until the drain state is known', () => {
  const fence = { vips4: ['192.0.2.10'], vips6: [], interfaces: ['eth0'], memberlistPorts: [] };
  // What a restart with the API unreachable sees: the fence from nft, no Node, not synced.
  const w = new World(
    obs({ synced: false, draining: false, apiDownSince: T0, excludeLabel: false, labelOwned: false, fence }),
  );
  w.mem = resume(undefined, fence, T0);
  for (let i = 0; i < 5; i++) assert.deepEqual(kinds(w.run({ now: T0 + i * 1000 })), []);
  assert.equal(w.mem.phase, 'fenced');
  // The API answers: still cordoned, so the fence stays; uncordoned, it goes.
  assert.deepEqual(
    kinds(w.run({ now: T0 + 6000, synced: true, apiDownSince: undefined, draining: true })),
    [],
  );
  assert.equal(w.mem.phase, 'fenced');
  assert.deepEqual(kinds(w.run({ now: T0 + 7000, draining: false })), ['unfence']);
});

test('candidates: same DaemonSet, schedulable, not excluded, Ready, network available', () => {
  const node = (name: string, extra: Partial<Node> = {}, ready = 'True'): Node => ({
    metadata: { name, labels: {} },
    spec: {},
    status: { conditions: [{ type: 'Ready', status: ready }] },
    ...extra,
  });
  const nodes: Node[] = [
    node('node-a'),
    node('node-b'),
    node('node-c', { spec: { unschedulable: true } }),
    node('node-d', { metadata: { name: 'node-d', labels: { [EXCLUDE_LABEL]: 'false' } } }),
    node('node-e', {}, 'False'),
    node('node-f', {
      status: {
        conditions: [
          { type: 'Ready', status: 'True' },
          { type: 'NetworkUnavailable', status: 'True' },
        ],
      },
    }),
    node('node-g'),
  ];
  const pod = (n: string, uid = 'ds', ready = 'True'): Pod => ({
    metadata: {
      name: `speaker-${n}`,
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'speaker', uid }],
    },
    spec: { nodeName: n },
    status: { conditions: [{ type: 'Ready', status: ready }] },
  });
  const pods = ['node-a', 'node-b', 'node-c', 'node-d', 'node-e', 'node-f'].map((n) => pod(n));
  pods.push(pod('node-g', 'other'));
  assert.deepEqual(otherCandidates(nodes, pods, 'node-a', 'ds'), ['node-b']);
  assert.deepEqual(otherCandidates(nodes, [], 'node-a', undefined), ['node-b', 'node-g']);
  // A speaker that is not Ready (crash-looping, starting) cannot take a VIP over.
  const notReady = pods.map((p) => (p.spec?.nodeName === 'node-b' ? pod('node-b', 'ds', 'False') : p));
  assert.deepEqual(otherCandidates(nodes, notReady, 'node-a', 'ds'), []);
});
