import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describePlan, nodePatch, planNode } from '../../../cli/reset.ts';
import { buildStatus, guardedLeases, renderStatus } from '../../../cli/status.ts';
import type { Lease, Node, Pod } from '../../../shared/kube/types.ts';
import { EXCLUDE_LABEL, LABEL_OWNED_ANNOTATION, STATUS_ANNOTATION } from '../../../sidecar/l2/core.ts';
import { LEASE_EVENT_REASONS } from '../../../sidecar/lease/core.ts';
import { A, SIDECAR_NAME } from '../../../webhook/profiles.ts';

const l2Status = (over: Record<string, unknown> = {}) =>
  JSON.stringify({
    phase: 'fenced',
    since: '2026-11-22T01:00:00.000Z',
    vips: ['198.51.100.100'],
    services: [{ service: 'web/www', ips: ['198.51.100.100'] }],
    handedTo: { 'web/www': 'node-b' },
    fenced: true,
    failsafe: false,
    interfaces: ['eth0'],
    ...over,
  });

const node = (
  name: string,
  meta: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
  unschedulable = false,
): Node => ({
  metadata: { name, resourceVersion: '42', ...meta },
  spec: unschedulable ? { unschedulable: true } : {},
});

const injected = (
  ns: string,
  name: string,
  nodeName: string,
  profile: string,
  env: Record<string, string>,
  native = true,
): Pod => {
  const sidecar = { name: SIDECAR_NAME, env: Object.entries(env).map(([n, value]) => ({ name: n, value })) };
  return {
    metadata: {
      name,
      namespace: ns,
      annotations: {
        [A.status]: JSON.stringify({ profile, features: (env.DRAINGUARD_FEATURES ?? '').split(',') }),
      },
    },
    spec: {
      nodeName,
      containers: [{ name: 'main' }, ...(native ? [] : [sidecar])],
      ...(native ? { initContainers: [sidecar] } : {}),
    },
  };
};

const lease = (holder: string, renew: string): Lease => ({
  spec: { holderIdentity: holder, renewTime: renew },
});

test('guarded leases: explicit list (namespaced or not), skupper default, and none without the feature', () => {
  assert.deepEqual(
    guardedLeases(
      injected('app', 'p', 'n', 'lease', {
        DRAINGUARD_FEATURES: 'lease-handover',
        DRAINGUARD_LEASES: 'one,other/two',
      }),
    ),
    ['app/one', 'other/two'],
  );
  assert.deepEqual(
    guardedLeases(
      injected('site', 'r', 'n', 'skupper-router', { DRAINGUARD_FEATURES: 'lease-handover' }, false),
    ),
    ['site/skupper-site-leader'],
  );
  assert.deepEqual(
    guardedLeases(injected('m', 's', 'n', 'metallb-speaker', { DRAINGUARD_FEATURES: 'l2-handover' })),
    [],
  );
  assert.deepEqual(guardedLeases({ metadata: { name: 'plain', namespace: 'x' } }), []);
});

test('status per node: drain, phase, fence, VIPs, and who put the exclude label there', () => {
  const r = buildStatus({
    nodes: [
      node(
        'node-a',
        {
          labels: { [EXCLUDE_LABEL]: '' },
          annotations: { [LABEL_OWNED_ANNOTATION]: 'true', [STATUS_ANNOTATION]: l2Status() },
        },
        true,
      ),
      node('node-b', { labels: { [EXCLUDE_LABEL]: 'true' } }),
      node('node-c', {
        annotations: { [STATUS_ANNOTATION]: l2Status({ phase: 'failsafe-fenced', failsafe: true }) },
      }),
      node('node-d', { annotations: { [STATUS_ANNOTATION]: 'not json' } }),
    ],
    pods: [
      injected('metallb-system', 'speaker-a', 'node-a', 'metallb-speaker', {
        DRAINGUARD_FEATURES: 'l2-handover',
      }),
    ],
    leases: new Map(),
    events: [],
    l2Statuses: [
      { status: { node: 'node-b', serviceName: 'www', serviceNamespace: 'web' } },
      { status: { node: 'node-b', serviceName: 'api', serviceNamespace: 'web' } },
      // A Service without an address yet, and an object with no node: no VIPs from them.
      { status: { node: 'node-c', serviceName: 'pending', serviceNamespace: 'web' } },
      { status: {} },
    ],
    services: [
      {
        metadata: { name: 'www', namespace: 'web' },
        status: { loadBalancer: { ingress: [{ ip: '198.51.100.100' }] } },
      },
      {
        metadata: { name: 'api', namespace: 'web' },
        status: { loadBalancer: { ingress: [{ ip: '198.51.100.101' }, { ip: '2001:db8::100' }] } },
      },
      { metadata: { name: 'pending', namespace: 'web' }, status: {} },
    ],
  });
  const [a, b, c, d] = r.nodes;
  assert.equal(a?.draining, 'cordoned');
  assert.equal(a?.fence, 'installed');
  assert.equal(a?.excludeLabel, 'drainguard');
  assert.deepEqual(a?.status?.vips, ['198.51.100.100']);
  assert.deepEqual(a?.injectedPods, ['metallb-system/speaker-a']);
  assert.equal(b?.draining, null);
  assert.deepEqual(b?.announces, ['198.51.100.100', '198.51.100.101', '2001:db8::100']);
  assert.deepEqual(a?.announces, []);
  assert.deepEqual(c?.announces, []);
  assert.equal(b?.excludeLabel, 'pre-existing');
  assert.equal(b?.fence, 'unknown');
  assert.equal(c?.fence, 'failsafe');
  assert.equal(c?.excludeLabel, 'none');
  assert.equal(d?.status, undefined);
  const text = renderStatus(r, Date.parse('2026-11-22T01:00:30.000Z'));
  // The L2 table as sidecar/l2/status.ts formats it, then the cluster-wide columns.
  assert.match(text, /^NODE\s+CORDONED\s+EXCLUDE-LABEL\s+L2-PHASE/);
  assert.match(text, /node-a\s+yes\s+drainguard\s+fenced\s+30s\s+198\.51\.100\.100\s+node-b\s+eth0/);
  assert.match(text, /\nNODE\s+DRAINING\s+ANNOUNCES\s+INJECTED PODS\n/);
  assert.match(text, /node-a\s+cordoned\s+-\s+metallb-system\/speaker-a/);
  assert.match(text, /node-b\s+no\s+198\.51\.100\.100,198\.51\.100\.101,2001:db8::100\s+-/);
  assert.match(text, /No Leases guarded/);
});

test('status per Lease: holder, renew and the latest handover Event naming exactly that Lease', () => {
  const pods = [
    injected('site', 'router-1', 'node-a', 'skupper-router', { DRAINGUARD_FEATURES: 'lease-handover' }),
    injected('site', 'router-2', 'node-b', 'skupper-router', { DRAINGUARD_FEATURES: 'lease-handover' }),
  ];
  const ev = (reason: string, message: string, t: string) => ({ reason, message, lastTimestamp: t });
  const r = buildStatus({
    nodes: [],
    pods,
    leases: new Map([['site/skupper-site-leader', lease('router-2', '2026-11-22T01:00:05.000000Z')]]),
    events: [
      ev(
        LEASE_EVENT_REASONS.handedOver,
        'Lease site/skupper-site-leader handed to router-2 in 0.2 s',
        '2026-11-22T01:00:04Z',
      ),
      ev(
        LEASE_EVENT_REASONS.failed,
        'Lease site/skupper-site-leader not handed over: x',
        '2026-11-22T00:59:00Z',
      ),
      // A Lease whose name extends ours, and an unrelated reason: neither counts.
      ev(
        LEASE_EVENT_REASONS.handedOver,
        'Lease site/skupper-site-leader-2 handed to z',
        '2026-11-22T01:10:00Z',
      ),
      ev('Killing', 'Lease site/skupper-site-leader', '2026-11-22T01:20:00Z'),
    ],
  });
  assert.equal(r.leases.length, 1);
  const l = r.leases[0];
  assert.equal(l?.holder, 'router-2');
  assert.equal(l?.renewTime, '2026-11-22T01:00:05.000000Z');
  assert.deepEqual(l?.guardedBy, ['site/router-1', 'site/router-2']);
  assert.equal(l?.lastHandover?.reason, LEASE_EVENT_REASONS.handedOver);
  assert.match(l?.lastHandover?.message ?? '', /handed to router-2/);
  const missing = buildStatus({ nodes: [], pods, leases: new Map(), events: [] });
  assert.equal(missing.leases[0]?.exists, false);
  assert.match(renderStatus(missing, 0), /site\/skupper-site-leader\s+\(missing\)/);
});

test('reset removes the label only where drainguard added it, and every drainguard annotation', () => {
  const ours = planNode(
    node('node-a', {
      labels: { [EXCLUDE_LABEL]: '' },
      annotations: {
        [LABEL_OWNED_ANNOTATION]: 'true',
        [STATUS_ANNOTATION]: l2Status(),
        'other.io/x': 'keep',
      },
    }),
    [],
  );
  assert.equal(ours.removeLabel, true);
  assert.deepEqual(ours.removeAnnotations, [LABEL_OWNED_ANNOTATION, STATUS_ANNOTATION].sort());
  assert.deepEqual(nodePatch(ours), {
    metadata: {
      resourceVersion: '42',
      labels: { [EXCLUDE_LABEL]: null },
      annotations: { [LABEL_OWNED_ANNOTATION]: null, [STATUS_ANNOTATION]: null },
    },
  });
  const kubeadm = planNode(
    node('cp', { labels: { [EXCLUDE_LABEL]: '' }, annotations: { [STATUS_ANNOTATION]: l2Status() } }),
    [],
  );
  assert.equal(kubeadm.removeLabel, false);
  assert.ok(kubeadm.keptLabel);
  assert.deepEqual(Object.keys((nodePatch(kubeadm)?.metadata ?? {}) as object).sort(), [
    'annotations',
    'resourceVersion',
  ]);
  // "false" is not ours either: only an explicit "true" proves drainguard added the label.
  assert.equal(
    planNode(
      node('x', { labels: { [EXCLUDE_LABEL]: '' }, annotations: { [LABEL_OWNED_ANNOTATION]: 'false' } }),
      [],
    ).removeLabel,
    false,
  );
  const clean = planNode(node('clean'), []);
  assert.equal(nodePatch(clean), undefined);
  assert.deepEqual(describePlan(clean, false), ["node/clean: nothing of drainguard's on the Node"]);
});

test('reset warns when an injected pod still runs on the node, and says would/removed', () => {
  const p = planNode(node('node-a', { annotations: { [STATUS_ANNOTATION]: l2Status() } }), [
    injected('metallb-system', 'speaker-a', 'node-a', 'metallb-speaker', {
      DRAINGUARD_FEATURES: 'l2-handover',
    }),
    injected('metallb-system', 'speaker-b', 'node-b', 'metallb-speaker', {
      DRAINGUARD_FEATURES: 'l2-handover',
    }),
  ]);
  assert.deepEqual(p.liveSidecars, ['metallb-system/speaker-a']);
  const dry = describePlan(p, false);
  assert.ok(dry.some((l) => l.startsWith(`node/node-a: would remove annotation ${STATUS_ANNOTATION}`)));
  assert.ok(dry.some((l) => l.includes('warning: injected pods still run here (metallb-system/speaker-a)')));
  assert.ok(describePlan(p, true).some((l) => l.startsWith('node/node-a: removed annotation')));
});
