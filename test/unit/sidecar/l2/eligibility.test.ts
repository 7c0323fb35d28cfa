import t from 'tap';
import { selectorMatches } from '../../../../shared/kube/selector.ts';
import type { Node, Pod } from '../../../../shared/kube/types.ts';
import { EXCLUDE_LABEL } from '../../../../shared/names.ts';
import { inAddresses } from '../../../../shared/net/address-pool.ts';
import {
  advertisementsFor,
  eligibleFor,
  metallbConfigFrom,
  otherCandidates,
  readyEndpointNodes,
  trimNode,
  trimPod,
} from '../../../../sidecar/l2/eligibility.ts';

const labels = new Map<string, Record<string, string>>([
  ['node-b', { zone: 'a', 'kubernetes.io/hostname': 'node-b' }],
  ['node-c', { zone: 'b', 'kubernetes.io/hostname': 'node-c' }],
  ['node-d', { zone: 'b', 'kubernetes.io/hostname': 'node-d' }],
]);
const candidates = ['node-b', 'node-c', 'node-d'];
const cluster = { service: 'web/www', ips: ['192.0.2.10'], local: false };

t.test('ShouldAnnounce per service: Cluster policy, no MetalLB config known: every candidate', async (t) => {
  t.strictSame(eligibleFor(cluster, candidates, labels, undefined), candidates);
});

t.test(
  'ShouldAnnounce per service: externalTrafficPolicy Local keeps only nodes with a ready endpoint',
  async (t) => {
    const svc = { ...cluster, local: true, readyEndpointNodes: ['node-a', 'node-c'] };
    t.strictSame(eligibleFor(svc, candidates, labels, undefined), ['node-c']);
    t.strictSame(eligibleFor({ ...svc, readyEndpointNodes: ['node-a'] }, candidates, labels, undefined), []);
  },
);

t.test(
  'ShouldAnnounce per service: L2Advertisement node selectors of the VIP pool narrow the nodes',
  async (t) => {
    const metallb = metallbConfigFrom(
      [
        { metadata: { name: 'lan', labels: { tier: 'lan' } }, spec: { addresses: ['192.0.2.0/25'] } },
        { metadata: { name: 'dmz' }, spec: { addresses: ['198.51.100.10-198.51.100.20'] } },
      ],
      [
        {
          metadata: { name: 'lan-zone-b' },
          spec: {
            ipAddressPoolSelectors: [{ matchLabels: { tier: 'lan' } }],
            nodeSelectors: [{ matchLabels: { zone: 'b' } }],
          },
        },
        {
          metadata: { name: 'dmz-node-b' },
          spec: {
            ipAddressPools: ['dmz'],
            nodeSelectors: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['node-b'] }] },
            ],
          },
        },
      ],
    );
    t.strictSame(eligibleFor(cluster, candidates, labels, metallb), ['node-c', 'node-d']);
    t.strictSame(eligibleFor({ ...cluster, ips: ['198.51.100.15'] }, candidates, labels, metallb), [
      'node-b',
    ]);
    // Outside every pool: MetalLB would not announce it from this configuration; not narrowed.
    t.equal(advertisementsFor(['203.0.113.1'], metallb), undefined);
    t.strictSame(eligibleFor({ ...cluster, ips: ['203.0.113.1'] }, candidates, labels, metallb), candidates);
    // An L2Advertisement with neither pool names nor selectors covers every pool, every node.
    const all = metallbConfigFrom(
      metallb.pools.map((p) => ({
        metadata: { name: p.name, labels: p.labels },
        spec: { addresses: p.addresses },
      })),
      [
        {
          metadata: { name: 'lan-zone-b' },
          spec: { ipAddressPools: ['lan'], nodeSelectors: [{ matchLabels: { zone: 'b' } }] },
        },
        { metadata: { name: 'everything' }, spec: {} },
      ],
    );
    t.strictSame(eligibleFor(cluster, candidates, labels, all), candidates);
  },
);

t.test(
  'EndpointSlices: ready or unknown readiness counts, nodeName (v1) or hostname topology (v1beta1)',
  async (t) => {
    t.strictSame(
      readyEndpointNodes([
        {
          endpoints: [
            { nodeName: 'node-b', conditions: { ready: true } },
            { nodeName: 'node-c', conditions: { ready: false } },
            { topology: { 'kubernetes.io/hostname': 'node-d' }, conditions: {} },
            { conditions: { ready: true } },
            // Terminating but still serving: MetalLB's EndpointCanServe counts it.
            { nodeName: 'node-e', conditions: { ready: false, serving: true } },
          ],
        },
        { endpoints: [{ nodeName: 'node-b' }] },
        {},
      ]),
      ['node-b', 'node-d', 'node-e'],
    );
  },
);

t.test(
  'label selectors: matchLabels and every matchExpressions operator; unknown operator matches nothing',
  async (t) => {
    const l = { a: '1', b: '2' };
    t.ok(selectorMatches({}, l));
    t.ok(selectorMatches({ matchLabels: { a: '1' } }, l));
    t.ok(!selectorMatches({ matchLabels: { a: '2' } }, l));
    t.ok(selectorMatches({ matchExpressions: [{ key: 'a', operator: 'In', values: ['1', '3'] }] }, l));
    t.ok(!selectorMatches({ matchExpressions: [{ key: 'c', operator: 'In', values: ['1'] }] }, l));
    t.ok(selectorMatches({ matchExpressions: [{ key: 'c', operator: 'NotIn', values: ['1'] }] }, l));
    t.ok(!selectorMatches({ matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['1'] }] }, l));
    t.ok(selectorMatches({ matchExpressions: [{ key: 'b', operator: 'Exists' }] }, l));
    t.ok(!selectorMatches({ matchExpressions: [{ key: 'b', operator: 'DoesNotExist' }] }, l));
    t.ok(!selectorMatches({ matchExpressions: [{ key: 'b', operator: 'Gt', values: ['1'] }] }, l));
    t.ok(!selectorMatches({ matchLabels: { a: '1' } }, undefined));
  },
);

t.test(
  'IPAddressPool addresses: CIDRs and ranges, IPv4 and IPv6; malformed entries match nothing',
  async (t) => {
    t.ok(inAddresses('192.0.2.10', ['192.0.2.0/24']));
    t.ok(!inAddresses('192.0.3.10', ['192.0.2.0/24']));
    t.ok(inAddresses('192.0.2.10', ['192.0.2.5 - 192.0.2.10']));
    t.ok(!inAddresses('192.0.2.11', ['192.0.2.5-192.0.2.10']));
    t.ok(inAddresses('192.0.2.10', ['192.0.2.10/32']));
    t.ok(inAddresses('2001:db8::5', ['2001:db8::/64']));
    t.ok(inAddresses('2001:db8::5', ['2001:db8::1-2001:db8::9']));
    t.ok(!inAddresses('2001:db8::5', ['192.0.2.0/24']));
    t.ok(!inAddresses('192.0.2.10', ['192.0.2.0/99', 'garbage', '192.0.2.20-192.0.2.5']));
    t.ok(!inAddresses('not-an-ip', ['0.0.0.0/0']));
  },
);

t.test('candidates: same DaemonSet, schedulable, not excluded, Ready, network available', async (t) => {
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
  t.strictSame(otherCandidates(nodes, pods, 'node-a', 'ds'), ['node-b']);
  t.strictSame(otherCandidates(nodes, [], 'node-a', undefined), ['node-b', 'node-g']);
  // A speaker that is not Ready (crash-looping, starting) cannot take a VIP over.
  const notReady = pods.map((p) => (p.spec?.nodeName === 'node-b' ? pod('node-b', 'ds', 'False') : p));
  t.strictSame(otherCandidates(nodes, notReady, 'node-a', 'ds'), []);

  // Trimmed to what is read (the watched view keeps only that): the same candidates.
  t.strictSame(otherCandidates(nodes.map(trimNode), pods.map(trimPod), 'node-a', 'ds'), ['node-b']);
  t.strictSame(otherCandidates(nodes.map(trimNode), notReady.map(trimPod), 'node-a', 'ds'), []);
});

t.test(
  'a Node and a pod trimmed to what the candidates read: names, labels, conditions that count',
  async (t) => {
    const big: Node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: 'node-b',
        resourceVersion: '7',
        labels: { zone: 'a' },
        annotations: { 'node.alpha.kubernetes.io/ttl': '0', big: 'x'.repeat(5_000) },
        uid: 'u',
      },
      spec: { unschedulable: true, podCIDR: '10.0.0.0/24', taints: [{ key: 'k', effect: 'NoSchedule' }] },
      status: {
        addresses: [{ type: 'InternalIP', address: '10.0.0.2' }],
        conditions: [
          { type: 'MemoryPressure', status: 'False' },
          { type: 'Ready', status: 'True' },
          { type: 'NetworkUnavailable', status: 'False' },
        ],
        nodeInfo: { kubeletVersion: 'v1.20.2' },
      },
    };
    t.strictSame(trimNode(big), {
      metadata: { name: 'node-b', resourceVersion: '7', labels: { zone: 'a' } },
      spec: { unschedulable: true },
      status: {
        conditions: [
          { type: 'Ready', status: 'True' },
          { type: 'NetworkUnavailable', status: 'False' },
        ],
      },
    });
    const speaker: Pod = {
      metadata: {
        name: 'speaker-b',
        namespace: 'metallb-system',
        resourceVersion: '8',
        deletionTimestamp: '2026-01-01T00:00:00Z',
        labels: { app: 'metallb' },
        ownerReferences: [
          { apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'speaker', uid: 'ds', controller: true },
        ],
      },
      spec: { nodeName: 'node-b', containers: [{ name: 'speaker' }] },
      status: {
        phase: 'Running',
        conditions: [
          { type: 'Initialized', status: 'True' },
          { type: 'Ready', status: 'True' },
        ],
      },
    };
    t.strictSame(trimPod(speaker), {
      metadata: {
        name: 'speaker-b',
        namespace: 'metallb-system',
        resourceVersion: '8',
        deletionTimestamp: '2026-01-01T00:00:00Z',
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'speaker', uid: 'ds' }],
      },
      spec: { nodeName: 'node-b' },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    });
  },
);
