import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import type { IdentityScheme } from '../../../../shared/contract.ts';
import type { Lease, Node, Pod } from '../../../../shared/kube/types.ts';
import {
  afterConflict,
  chooseSuccessor,
  containerPhase,
  decideHandover,
  identityMayBeShared,
  identitySharers,
  isOwnIdentity,
  leaderStopped,
  leaseSettings,
  parseLeaseRefs,
  podHostname,
  podIdentity,
  verifyProgress,
} from '../../../../sidecar/lease/core.ts';

const golden = (name: string) => fileURLToPath(new URL(`../../../golden/lease/${name}`, import.meta.url));
const readJson = <T>(name: string) => JSON.parse(readFileSync(golden(name), 'utf8')) as T;

/** Compares with a golden file; UPDATE_GOLDEN=1 rewrites it (review the diff before committing). */
function matchGolden(t: Test, name: string, actual: unknown): void {
  const text = `${JSON.stringify(actual, null, 2)}\n`;
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(golden(name), text);
  t.ok(existsSync(golden(name)), `golden ${name} missing (UPDATE_GOLDEN=1 to create)`);
  t.equal(text, readFileSync(golden(name), 'utf8'), `golden ${name} differs (UPDATE_GOLDEN=1 to accept)`);
}

// 2026-11-22T00:00:01.234Z
const NOW = Date.UTC(2026, 10, 22, 0, 0, 1, 234);

/** decideHandover with pod-name identities at NOW, unless told otherwise. */
const decide = (
  lease: Lease,
  identity: string,
  successor: string | undefined,
  more: { scheme?: IdentityScheme; nowMs?: number } = {},
) =>
  decideHandover({ lease, identity, successor, scheme: more.scheme ?? 'pod-name', nowMs: more.nowMs ?? NOW });

function pod(
  name: string,
  nodeName: string,
  opts: { ready?: boolean; terminating?: boolean; created?: string; phase?: string } = {},
): Pod {
  return {
    metadata: {
      name,
      namespace: 'site-a',
      creationTimestamp: opts.created ?? '2026-11-20T08:00:00Z',
      ...(opts.terminating ? { deletionTimestamp: '2026-11-22T00:00:00Z' } : {}),
    },
    spec: { nodeName },
    status: {
      phase: opts.phase ?? 'Running',
      conditions: [{ type: 'Ready', status: opts.ready === false ? 'False' : 'True' }],
    },
  };
}

t.test('lease settings', async (t) => {
  t.test('parses names and namespace/name, rejecting anything else with the variable named', async (t) => {
    t.strictSame(parseLeaseRefs(['a', 'other/b'], 'ns'), [
      { namespace: 'ns', name: 'a' },
      { namespace: 'other', name: 'b' },
    ]);
    t.throws(() => parseLeaseRefs(['a/b/c'], 'ns'), /DRAINGUARD_LEASES entry "a\/b\/c"/);
    t.throws(() => parseLeaseRefs(['Upper'], 'ns'), /accepted forms/);
  });

  t.test('fills skupper defaults and demands a leader container for the generic profile', async (t) => {
    const s = leaseSettings(
      'skupper-router',
      { leases: [], guardedContainer: '', successorSelector: '', identityScheme: 'pod-name' },
      'site-a',
    );
    t.strictSame(s, {
      leases: [{ namespace: 'site-a', name: 'skupper-site-leader' }],
      leaderContainer: 'kube-adaptor',
      successorSelector: 'skupper.io/component=router',
      identityScheme: 'pod-name',
    });
    t.throws(
      () =>
        leaseSettings(
          'lease',
          { leases: ['x'], guardedContainer: '', successorSelector: 'a=b', identityScheme: 'pod-name' },
          'ns',
        ),
      /DRAINGUARD_GUARDED_CONTAINER is empty/,
    );
  });
});

t.test('identity schemes', async (t) => {
  t.test('pod-name matches the pod name only', async (t) => {
    t.equal(isOwnIdentity('router-a', 'router-a', 'pod-name'), true);
    t.equal(isOwnIdentity('router-a_123', 'router-a', 'pod-name'), false);
    t.equal(isOwnIdentity('', 'router-a', 'pod-name'), false);
    t.equal(isOwnIdentity(null, 'router-a', 'pod-name'), false);
  });
  t.test('pod-name-prefix recognises controller-runtime <pod>_<uuid>, not a longer pod name', async (t) => {
    t.equal(isOwnIdentity('op-1_3e0c2a51', 'op-1', 'pod-name-prefix'), true);
    t.equal(isOwnIdentity('op-1', 'op-1', 'pod-name-prefix'), true);
    t.equal(isOwnIdentity('op-10_3e0c2a51', 'op-1', 'pod-name-prefix'), false);
  });
});

t.test('identity as the kubelet and the elector make it', async (t) => {
  const p = (name: string, spec: Pod['spec'] = {}): Pod => ({
    metadata: { name },
    spec: { nodeName: 'n1', ...spec },
  });
  t.test(
    'hostname: pod name, spec.hostname, the node on the host network, long names cut to 63 without trailing - or .',
    async (t) => {
      t.equal(podHostname(p('router-a')), 'router-a');
      t.equal(podHostname(p('router-a', { hostname: 'custom' })), 'custom');
      t.equal(podHostname(p('speaker-x', { hostNetwork: true })), 'n1');
      const long = `${'a'.repeat(61)}-.b-c`;
      t.equal(podHostname(p(long)), 'a'.repeat(61));
      t.equal(podHostname(p('b'.repeat(70))), 'b'.repeat(63));
    },
  );
  t.test('node-name (kube-vip: vip_nodename) is the node; the schemes pick the identity', async (t) => {
    t.equal(podIdentity(p('kube-vip-xyz'), 'node-name'), 'n1');
    t.equal(podIdentity(p('router-a'), 'pod-name'), 'router-a');
    t.equal(isOwnIdentity('n1', podIdentity(p('kube-vip-xyz'), 'node-name'), 'node-name'), true);
    t.equal(isOwnIdentity('n1', '', 'node-name'), false, 'an unknown identity owns nothing');
  });
  t.test('node-name: the successor is named by its node; one on this same node means release', async (t) => {
    const lease: Lease = {
      metadata: { name: 'plndr-cp-lock', resourceVersion: '7' },
      spec: { holderIdentity: 'n1', leaseDurationSeconds: 5, renewTime: '2026-11-23T00:00:00.000000Z' },
    };
    const other = decideHandover({ lease, identity: 'n1', scheme: 'node-name', successor: 'n2', nowMs: 0 });
    t.equal(other.action, 'replace');
    t.equal(other.action === 'replace' && other.lease.spec?.holderIdentity, 'n2');
    t.equal(
      decideHandover({ lease, identity: 'n1', scheme: 'node-name', successor: 'n1', nowMs: 0 }).action,
      'release',
    );
  });
});

t.test('leader container phase', async (t) => {
  t.test(
    'reads the container state; only terminated counts as stopped (a gone pod may be force-deleted)',
    async (t) => {
      const p = pod('a', 'n1');
      t.equal(containerPhase(p, 'kube-adaptor'), 'unknown');
      p.status!.containerStatuses = [{ name: 'kube-adaptor', state: { running: {} } }];
      t.equal(containerPhase(p, 'kube-adaptor'), 'running');
      t.equal(leaderStopped(containerPhase(p, 'kube-adaptor')), false);
      p.status!.containerStatuses = [{ name: 'kube-adaptor', state: { terminated: { exitCode: 0 } } }];
      t.equal(containerPhase(p, 'kube-adaptor'), 'terminated');
      t.equal(leaderStopped('terminated'), true);
      t.equal(containerPhase(undefined, 'kube-adaptor'), 'pod-gone');
      t.equal(leaderStopped('pod-gone'), false);
      t.equal(leaderStopped('unknown'), false);
    },
  );
});

t.test('successor choice', async (t) => {
  const self = { name: 'r-a', nodeName: 'n1' };
  const nodes = new Map<string, Node>([
    ['n1', { metadata: { name: 'n1' } }],
    ['n2', { metadata: { name: 'n2' } }],
    ['n3', { metadata: { name: 'n3' }, spec: { unschedulable: true } }],
    [
      'n4',
      {
        metadata: { name: 'n4' },
        spec: { taints: [{ key: 'karpenter.sh/disrupted', effect: 'NoSchedule' }] },
      },
    ],
  ]);
  const drainTaints = ['karpenter.sh/disrupted'];

  t.test('prefers another node, skips itself, terminating, not-Ready and draining-node pods', async (t) => {
    const choice = chooseSuccessor({
      self,
      nodes,
      drainTaints,
      pods: [
        pod('r-a', 'n1'),
        pod('r-same-node', 'n1', { created: '2026-01-01T00:00:00Z' }),
        pod('r-gone', 'n2', { terminating: true }),
        pod('r-unready', 'n2', { ready: false }),
        pod('r-cordoned', 'n3'),
        pod('r-tainted', 'n4'),
        pod('r-pending', 'n2', { phase: 'Pending' }),
        pod('r-b', 'n2'),
      ],
    });
    t.equal(choice.successor, 'r-b');
    t.equal(choice.successorNode, 'n2');
    matchGolden(t, 'successor-rejections.json', choice.rejected);
  });

  t.test('passes over pods on NotReady or unreachable nodes', async (t) => {
    const sick = new Map<string, Node>([
      [
        'n5',
        {
          metadata: { name: 'n5' },
          spec: {},
          status: { conditions: [{ type: 'Ready', status: 'Unknown' }] },
        },
      ],
      [
        'n6',
        {
          metadata: { name: 'n6' },
          spec: { taints: [{ key: 'node.kubernetes.io/unreachable', effect: 'NoExecute' }] },
        },
      ],
      [
        'n7',
        { metadata: { name: 'n7' }, spec: {}, status: { conditions: [{ type: 'Ready', status: 'True' }] } },
      ],
    ]);
    const choice = chooseSuccessor({
      self,
      nodes: sick,
      drainTaints,
      pods: [pod('r-a', 'n1'), pod('r-lost', 'n5'), pod('r-cut', 'n6'), pod('r-ok', 'n7')],
    });
    t.equal(choice.successor, 'r-ok');
    t.strictSame(choice.rejected, [
      { pod: 'r-lost', why: 'node not Ready (Unknown)' },
      { pod: 'r-cut', why: 'node tainted node.kubernetes.io/unreachable' },
    ]);
  });

  t.test('falls back to the same node, and to none', async (t) => {
    t.equal(
      chooseSuccessor({ self, nodes, drainTaints, pods: [pod('r-a', 'n1'), pod('r-c', 'n1')] }).successor,
      'r-c',
    );
    t.equal(
      chooseSuccessor({
        self,
        nodes,
        drainTaints,
        pods: [pod('r-a', 'n1'), pod('r-x', 'n2', { ready: false })],
      }).successor,
      undefined,
    );
  });

  t.test('orders equal candidates by age, then name', async (t) => {
    const pods = [
      pod('r-z', 'n2', { created: '2026-11-01T00:00:00Z' }),
      pod('r-y', 'n2', { created: '2026-11-02T00:00:00Z' }),
    ];
    t.equal(chooseSuccessor({ self, nodes, drainTaints, pods }).successor, 'r-z');
    const same = [pod('r-q', 'n2'), pod('r-p', 'n2')];
    t.equal(chooseSuccessor({ self, nodes, drainTaints, pods: same }).successor, 'r-p');
  });
});

t.test('handover decision (recorded Leases)', async (t) => {
  const skupper = readJson<Lease>('skupper-site-leader.json');
  const leader = 'skupper-router-6d9c7b8f5-x2k4p';

  t.test(
    'replaces the holder with the successor: fresh MicroTimes, same duration, transitions+1, same resourceVersion',
    async (t) => {
      const d = decide(skupper, leader, 'skupper-router-2-7c8d9-b5m2n');
      t.equal(d.action, 'replace');
      matchGolden(t, 'decision-replace.json', d);
      if (d.action !== 'replace') return;
      t.equal(d.lease.metadata?.resourceVersion, '48213');
      t.match(d.lease.spec?.renewTime ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
      t.equal(d.lease.spec?.leaseTransitions, 4);
      t.equal(skupper.spec?.holderIdentity, leader, 'input not mutated');
    },
  );

  t.test('releases the client-go way when there is no successor', async (t) => {
    const d = decide(skupper, leader, undefined);
    matchGolden(t, 'decision-release.json', d);
    t.equal(d.action, 'release');
    if (d.action !== 'release') return;
    t.equal(d.lease.spec?.holderIdentity, '');
    t.equal(d.lease.spec?.leaseDurationSeconds, 1);
    t.equal(d.lease.spec?.leaseTransitions, 3);
  });

  t.test('skips a Lease another pod holds or nobody holds', async (t) => {
    t.strictSame(decide(skupper, 'someone-else', 'x'), {
      action: 'skip',
      why: `held by ${leader}, not this pod`,
    });
    const free = structuredClone(skupper);
    free.spec!.holderIdentity = '';
    t.equal(decide(free, leader, 'x').action, 'skip');
  });

  t.test('pod-name-prefix: releases, never names a made-up holder', async (t) => {
    const cr = readJson<Lease>('controller-runtime-leader.json');
    const d = decide(cr, 'op-manager-5b7d8-qrx9z', 'op-manager-5b7d8-abcde', { scheme: 'pod-name-prefix' });
    matchGolden(t, 'decision-prefix-release.json', d);
    t.equal(d.action, 'release');
    t.equal(d.action === 'release' && d.lease.spec?.holderIdentity, '');
  });

  t.test(
    'coordinated election (spec.strategy): releases for the election controller, strategy kept, never names a holder',
    async (t) => {
      const kcm = readJson<Lease>('coordinated-kube-controller-manager.json');
      const d = decide(kcm, 'kcm-7f8d9c-a', 'kcm-7f8d9c-b');
      matchGolden(t, 'decision-coordinated-release.json', d);
      t.equal(d.action, 'release');
      if (d.action !== 'release') return;
      t.equal(d.lease.spec?.holderIdentity, '', 'no holder: the controller elects at once');
      t.equal(d.lease.spec?.leaseDurationSeconds, 1);
      t.equal(d.lease.spec?.renewTime, '2026-11-22T00:00:01.234000Z');
      t.equal(d.lease.spec?.strategy, 'OldestEmulationVersion', 'strategy kept');
      t.equal(d.lease.spec?.preferredHolder, undefined, 'no preferredHolder: only the holder reads it');
      t.equal(d.lease.metadata?.resourceVersion, kcm.metadata?.resourceVersion);
      // A stale preferredHolder is dropped, with or without a successor.
      const stale = structuredClone(kcm);
      stale.spec!.preferredHolder = 'kcm-old';
      for (const successor of ['kcm-7f8d9c-b', undefined]) {
        const r = decide(stale, 'kcm-7f8d9c-a', successor);
        t.equal(r.action, 'release');
        t.equal(r.action === 'release' && r.lease.spec?.preferredHolder, undefined);
      }
    },
  );
});

t.test('after the write', async (t) => {
  const skupper = readJson<Lease>('skupper-site-leader.json');
  const me = 'skupper-router-6d9c7b8f5-x2k4p';

  t.test('409: retry while still ours, stop once the holder changed', async (t) => {
    t.equal(afterConflict(skupper, me, 'pod-name'), 'retry');
    const other = structuredClone(skupper);
    other.spec!.holderIdentity = 'skupper-router-2-x';
    t.equal(afterConflict(other, me, 'pod-name'), 'stop');
    t.equal(afterConflict(undefined, me, 'pod-name'), 'stop');
  });

  t.test(
    '409 with the Lease renewed under our identity after we read it: another pod shares it; stop',
    async (t) => {
      const read = structuredClone(skupper);
      const renewed = structuredClone(skupper);
      renewed.spec!.renewTime = '2030-01-01T00:00:00.000000Z';
      t.equal(afterConflict(renewed, me, 'pod-name', undefined, read), 'renewed');
      t.equal(
        afterConflict(structuredClone(skupper), me, 'pod-name', undefined, read),
        'retry',
        'unchanged: retry',
      );
    },
  );

  t.test('409 after a retried write whose answer was lost: it landed, not "holder changed"', async (t) => {
    const d = decide(skupper, me, 'skupper-router-2-x', { nowMs: 1e12 });
    t.equal(d.action, 'replace');
    if (d.action !== 'replace') return;
    // The API server applied the first write; the retry carries the old resourceVersion: 409.
    const stored = { ...structuredClone(d.lease), metadata: { ...d.lease.metadata, resourceVersion: '999' } };
    t.equal(afterConflict(stored, me, 'pod-name', d.lease), 'landed');
    // Somebody else's write is not ours, even with the same holder.
    const theirs = structuredClone(stored);
    theirs.spec!.renewTime = '2030-01-01T00:00:00.000000Z';
    t.equal(afterConflict(theirs, me, 'pod-name', d.lease), 'stop');
  });

  t.test('verification: renewed by the successor, taken by another, acquired after release', async (t) => {
    const d = decide(skupper, me, 'succ');
    t.equal(d.action, 'replace');
    if (d.action !== 'replace') return;
    const written = d.lease;
    t.equal(verifyProgress(written, written, 'replace').state, 'pending');
    const renewed = structuredClone(written);
    renewed.spec!.renewTime = '2026-11-22T00:00:03.000000Z';
    t.equal(verifyProgress(written, renewed, 'replace').state, 'renewed');
    const taken = structuredClone(renewed);
    taken.spec!.holderIdentity = 'third';
    t.strictSame(verifyProgress(written, taken, 'replace'), { state: 'taken-by-other', holder: 'third' });
    const rel = decide(skupper, me, undefined);
    t.equal(
      verifyProgress(rel.action === 'release' ? rel.lease : written, taken, 'release').state,
      'acquired',
    );
    t.equal(verifyProgress(written, undefined, 'release').state, 'pending');
  });
});

t.test('identity shared with another live pod (surge rollout under node-name)', async (t) => {
  const on = (name: string, node: string, more: Partial<Pod> = {}): Pod => ({
    metadata: { name, ...more.metadata },
    spec: { nodeName: node, ...more.spec },
    status: { phase: 'Running', ...more.status },
  });
  const self = on('vip-old', 'n1');
  const surge = on('vip-new', 'n1', { status: { phase: 'Pending' } });
  const elsewhere = on('vip-b', 'n2');
  const done = on('vip-older', 'n1', { status: { phase: 'Succeeded' } });
  const leaving = on('vip-leaving', 'n1', { metadata: { deletionTimestamp: '2026-11-24T00:00:00Z' } });
  const pods = [self, surge, elsewhere, done, leaving];
  t.strictSame(
    identitySharers('vip-old', 'n1', pods, 'node-name'),
    ['vip-new', 'vip-leaving'],
    'every other pod on the node that may still run, Ready or not, terminating or not',
  );
  t.strictSame(identitySharers('vip-old', 'vip-old', pods, 'pod-name'), [], 'pod names are unique');
  const host = on('speaker-x', 'n1', { spec: { nodeName: 'n1', hostNetwork: true } });
  t.strictSame(
    identitySharers(
      'speaker-y',
      'n1',
      [host, on('speaker-y', 'n1', { spec: { nodeName: 'n1', hostNetwork: true } })],
      'pod-name',
    ),
    ['speaker-x'],
    "on the host network a pod's hostname is its node's",
  );
  t.strictSame(
    identitySharers('vip-old', '', pods, 'node-name'),
    [],
    'an unknown identity is shared with nobody',
  );
  t.ok(identityMayBeShared(self, 'node-name'));
  t.notOk(
    identityMayBeShared(self, 'pod-name'),
    'a pod name is unique: a renew under it was our own late write',
  );
  t.ok(identityMayBeShared(host, 'pod-name'));
});
