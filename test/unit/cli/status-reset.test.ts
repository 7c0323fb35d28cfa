import t from 'tap';
import { describePlan, nodePatch, planNode } from '../../../cli/reset.ts';
import { buildStatus, guardedLeases, renderStatus } from '../../../cli/status.ts';
import type { Lease, Node, Pod } from '../../../shared/kube/types.ts';
import type { L2State } from '../../../shared/l2-state.ts';
import {
  ANNOTATIONS,
  EXCLUDE_LABEL,
  L2_STATE_ANNOTATION,
  LABEL_OWNED_ANNOTATION,
  SIDECAR_NAME,
} from '../../../shared/names.ts';
import { LEASE_EVENT_REASONS } from '../../../sidecar/lease/core.ts';
import { fencedL2Status } from './l2-state-fixture.ts';

const l2Status = (over: Partial<L2State> = {}) => JSON.stringify(fencedL2Status({}, over));

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
        [ANNOTATIONS.injected]: JSON.stringify({
          profile,
          features: (env.DRAINGUARD_FEATURES ?? '').split(','),
        }),
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

t.test(
  'guarded leases: explicit list (namespaced or not), skupper default, and none without the feature',
  async (t) => {
    t.strictSame(
      guardedLeases(
        injected('app', 'p', 'n', 'lease', {
          DRAINGUARD_FEATURES: 'lease-handover',
          DRAINGUARD_LEASES: 'one,other/two',
        }),
      ),
      ['app/one', 'other/two'],
    );
    t.strictSame(
      guardedLeases(
        injected('site', 'r', 'n', 'skupper-router', { DRAINGUARD_FEATURES: 'lease-handover' }, false),
      ),
      ['site/skupper-site-leader'],
    );
    t.strictSame(
      guardedLeases(injected('m', 's', 'n', 'metallb-speaker', { DRAINGUARD_FEATURES: 'l2-handover' })),
      [],
    );
    t.strictSame(guardedLeases({ metadata: { name: 'plain', namespace: 'x' } }), []);
  },
);

t.test('status per node: drain, phase, fence, VIPs, and who put the exclude label there', async (t) => {
  const r = buildStatus({
    nodes: [
      node(
        'node-a',
        {
          labels: { [EXCLUDE_LABEL]: '' },
          annotations: { [LABEL_OWNED_ANNOTATION]: 'true', [L2_STATE_ANNOTATION]: l2Status() },
        },
        true,
      ),
      node('node-b', { labels: { [EXCLUDE_LABEL]: 'true' } }),
      node('node-c', {
        annotations: { [L2_STATE_ANNOTATION]: l2Status({ phase: 'failsafe-fenced', failsafe: true }) },
      }),
      node('node-d', { annotations: { [L2_STATE_ANNOTATION]: 'not json' } }),
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
  t.equal(a?.draining, 'cordoned');
  t.equal(a?.fence, 'installed');
  t.equal(a?.excludeLabel, 'drainguard');
  t.strictSame(a?.status?.vips, ['198.51.100.100']);
  t.strictSame(a?.injectedPods, ['metallb-system/speaker-a']);
  t.equal(b?.draining, null);
  t.strictSame(b?.announces, ['198.51.100.100', '198.51.100.101', '2001:db8::100']);
  t.strictSame(a?.announces, []);
  t.strictSame(c?.announces, []);
  t.equal(b?.excludeLabel, 'pre-existing');
  t.equal(b?.fence, 'unknown');
  t.equal(c?.fence, 'failsafe');
  t.equal(c?.excludeLabel, 'none');
  t.equal(d?.status, undefined);
  const text = renderStatus(r, Date.parse('2026-11-22T01:00:30.000Z'));
  // The L2 table as cli/l2-status.ts formats it, then the cluster-wide columns.
  t.match(text, /^NODE\s+CORDONED\s+EXCLUDE-LABEL\s+L2-PHASE/);
  t.match(text, /node-a\s+yes\s+drainguard\s+fenced\s+30s\s+198\.51\.100\.100\s+node-b\s+eth0/);
  t.match(text, /\nNODE\s+DRAINING\s+ANNOUNCES\s+INJECTED PODS\n/);
  t.match(text, /node-a\s+cordoned\s+-\s+metallb-system\/speaker-a/);
  t.match(text, /node-b\s+no\s+198\.51\.100\.100,198\.51\.100\.101,2001:db8::100\s+-/);
  t.match(text, /No Leases guarded/);
});

t.test(
  'status per Lease: holder, renew and the latest handover Event naming exactly that Lease',
  async (t) => {
    const pods = [
      injected('site', 'router-1', 'node-a', 'skupper-router', { DRAINGUARD_FEATURES: 'lease-handover' }),
      injected('site', 'router-2', 'node-b', 'skupper-router', { DRAINGUARD_FEATURES: 'lease-handover' }),
    ];
    const ev = (reason: string, message: string, at: string) => ({ reason, message, lastTimestamp: at });
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
    t.equal(r.leases.length, 1);
    const l = r.leases[0];
    t.equal(l?.holder, 'router-2');
    t.equal(l?.renewTime, '2026-11-22T01:00:05.000000Z');
    t.strictSame(l?.guardedBy, ['site/router-1', 'site/router-2']);
    t.equal(l?.lastHandover?.reason, LEASE_EVENT_REASONS.handedOver);
    t.match(l?.lastHandover?.message ?? '', /handed to router-2/);
    const missing = buildStatus({ nodes: [], pods, leases: new Map(), events: [] });
    t.equal(missing.leases[0]?.exists, false);
    t.match(renderStatus(missing, 0), /site\/skupper-site-leader\s+\(missing\)/);
  },
);

t.test(
  'reset removes the label only where drainguard added it, and every drainguard annotation',
  async (t) => {
    const ours = planNode(
      node('node-a', {
        labels: { [EXCLUDE_LABEL]: '' },
        annotations: {
          [LABEL_OWNED_ANNOTATION]: 'true',
          [L2_STATE_ANNOTATION]: l2Status(),
          'other.io/x': 'keep',
        },
      }),
      [],
    );
    t.equal(ours.removeLabel, true);
    t.strictSame(ours.removeAnnotations, [LABEL_OWNED_ANNOTATION, L2_STATE_ANNOTATION].sort());
    t.strictSame(nodePatch(ours), {
      metadata: {
        resourceVersion: '42',
        labels: { [EXCLUDE_LABEL]: null },
        annotations: { [LABEL_OWNED_ANNOTATION]: null, [L2_STATE_ANNOTATION]: null },
      },
    });
    const kubeadm = planNode(
      node('cp', { labels: { [EXCLUDE_LABEL]: '' }, annotations: { [L2_STATE_ANNOTATION]: l2Status() } }),
      [],
    );
    t.equal(kubeadm.removeLabel, false);
    t.ok(kubeadm.keptLabel);
    t.strictSame(Object.keys((nodePatch(kubeadm)?.metadata ?? {}) as object).sort(), [
      'annotations',
      'resourceVersion',
    ]);
    // "false" is not ours either: only an explicit "true" proves drainguard added the label.
    t.equal(
      planNode(
        node('x', { labels: { [EXCLUDE_LABEL]: '' }, annotations: { [LABEL_OWNED_ANNOTATION]: 'false' } }),
        [],
      ).removeLabel,
      false,
    );
    const clean = planNode(node('clean'), []);
    t.equal(nodePatch(clean), undefined);
    t.strictSame(describePlan(clean, false), ["node/clean: nothing of drainguard's on the Node"]);
  },
);

t.test('reset warns when an injected pod still runs on the node, and says would/removed', async (t) => {
  const p = planNode(node('node-a', { annotations: { [L2_STATE_ANNOTATION]: l2Status() } }), [
    injected('metallb-system', 'speaker-a', 'node-a', 'metallb-speaker', {
      DRAINGUARD_FEATURES: 'l2-handover',
    }),
    injected('metallb-system', 'speaker-b', 'node-b', 'metallb-speaker', {
      DRAINGUARD_FEATURES: 'l2-handover',
    }),
  ]);
  t.strictSame(p.liveSidecars, ['metallb-system/speaker-a']);
  const dry = describePlan(p, false);
  t.ok(dry.some((l) => l.startsWith(`node/node-a: would remove annotation ${L2_STATE_ANNOTATION}`)));
  t.ok(dry.some((l) => l.includes('warning: injected pods still run here (metallb-system/speaker-a)')));
  t.ok(describePlan(p, true).some((l) => l.startsWith('node/node-a: removed annotation')));
});
