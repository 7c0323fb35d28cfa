// The speaker simulator's election (lab/sim/speaker/election.ts) against MetalLB's rules, each
// test named after the upstream function it follows (speaker/layer2_controller.go,
// speaker/main.go, internal/config/config.go, internal/k8s/epslices, internal/k8s/nodes).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import {
  type AnnounceInput,
  type EndpointSlice,
  EXCLUDE_LABEL,
  endpointCanServe,
  type IPAddressPool,
  type L2Advertisement,
  owner,
  poolContains,
  type Service,
  selectorMatches,
  shouldAnnounce,
} from '../../../lab/sim/speaker/election.ts';
import type { Node } from '../../../shared/kube/types.ts';

const NAMES = ['node-a', 'node-b', 'node-c'];
const VIP = '192.0.2.100';

const node = (name: string, labels: Record<string, string> = {}, netDown = false): Node => ({
  metadata: { name, labels: { 'kubernetes.io/hostname': name, ...labels } },
  status: { conditions: netDown ? [{ type: 'NetworkUnavailable', status: 'True' }] : [] },
});
const service = (
  opts: { name?: string; ips?: string[]; local?: boolean; labels?: Record<string, string> } = {},
) =>
  ({
    metadata: { name: opts.name ?? 'www', namespace: 'web', labels: opts.labels ?? {} },
    spec: { type: 'LoadBalancer', externalTrafficPolicy: opts.local ? 'Local' : 'Cluster' },
    status: { loadBalancer: { ingress: (opts.ips ?? [VIP]).map((ip) => ({ ip })) } },
  }) satisfies Service;
type Ep = NonNullable<EndpointSlice['endpoints']>[number];
const slice = (endpoints: Ep[], svc = 'www', ns = 'web'): EndpointSlice => ({
  metadata: { name: `${svc}-x`, namespace: ns, labels: { 'kubernetes.io/service-name': svc } },
  endpoints,
});
const readyOn = (...nodes: string[]) =>
  slice(nodes.map((n) => ({ nodeName: n, conditions: { ready: true } })));
const pool = (name: string, addresses: string[], labels: Record<string, string> = {}): IPAddressPool => ({
  metadata: { name, namespace: 'metallb-system', labels },
  spec: { addresses },
});
const ad = (spec: L2Advertisement['spec'] = {}): L2Advertisement => ({
  metadata: { name: 'ad', namespace: 'metallb-system' },
  spec,
});
const base = (over: Partial<AnnounceInput> = {}): Omit<AnnounceInput, 'self'> => ({
  service: service(),
  endpointSlices: [readyOn(...NAMES)],
  pools: [pool('lab', ['192.0.2.100-192.0.2.120'])],
  l2Advertisements: [ad()],
  nodes: NAMES.map((n) => node(n)),
  live: new Set(NAMES),
  ...over,
});
/** Which nodes announce, each deciding on its own from the same view. */
const announcers = (over: Partial<AnnounceInput> = {}, selves: string[] = NAMES) =>
  selves.filter((self) => shouldAnnounce({ self, ...base(over) }).reason === '');
const hashOwner = (candidates: string[], ip = VIP) => {
  const key = (n: string) => createHash('sha256').update(`${n}#${ip}`).digest('hex');
  return [...candidates].sort((a, b) => key(a).localeCompare(key(b)))[0];
};

test('ShouldAnnounce (sort by sha256(node#ip)): candidates ordered by the hash of node + "#" + first LB IP, first wins', () => {
  const expected = hashOwner(NAMES);
  assert.equal(owner(NAMES, VIP), expected);
  assert.equal(owner([...NAMES].reverse(), VIP), expected, 'order of input does not matter');
  assert.equal(owner([], VIP), undefined);
  assert.deepEqual(announcers(), [expected], 'exactly one speaker announces, the hash winner');
  const d = shouldAnnounce({ self: expected as string, ...base() });
  assert.equal(d.candidates[0], expected);
  assert.deepEqual([...d.candidates].sort(), NAMES);
});

test('ShouldAnnounce (first LB IP): a dual-stack service is elected on its first IP and announces all of them', () => {
  const ips = ['192.0.2.101', '2001:db8::101'];
  const svc = service({ ips });
  const pools = [pool('dual', ['192.0.2.100/30', '2001:db8::100/120'])];
  const who = announcers({ service: svc, pools });
  assert.deepEqual(who, [hashOwner(NAMES, '192.0.2.101')]);
  assert.deepEqual(shouldAnnounce({ self: who[0] as string, ...base({ service: svc, pools }) }).ips, ips);
});

test("activeEndpointExists: no serving endpoint in the service's EndpointSlices → nobody announces", () => {
  assert.deepEqual(announcers({ endpointSlices: [] }), []);
  const notReady = slice(NAMES.map((n) => ({ nodeName: n, conditions: { ready: false } })));
  assert.deepEqual(announcers({ endpointSlices: [notReady] }), []);
  // Another service's slice, or one of the same name in another namespace, does not count.
  assert.deepEqual(announcers({ endpointSlices: [slice([{ nodeName: 'node-a' }], 'other')] }), []);
  assert.deepEqual(announcers({ endpointSlices: [slice([{ nodeName: 'node-a' }], 'www', 'elsewhere')] }), []);
  // One serving endpoint anywhere (even on no node at all) is enough for eTP Cluster.
  assert.deepEqual(announcers({ endpointSlices: [slice([{}])] }), [hashOwner(NAMES)]);
  const one = shouldAnnounce({ self: 'node-a', ...base({ endpointSlices: [] }) });
  assert.equal(one.reason, 'notOwner');
});

test('epslices.EndpointCanServe: ready true or absent, or else serving true', () => {
  assert.equal(endpointCanServe(undefined), true, 'no conditions');
  assert.equal(endpointCanServe({}), true, 'ready absent');
  assert.equal(endpointCanServe({ ready: null }), true, 'ready null');
  assert.equal(endpointCanServe({ ready: true }), true);
  assert.equal(endpointCanServe({ ready: false }), false);
  assert.equal(endpointCanServe({ ready: false, serving: true }), true, 'terminating but serving');
  assert.equal(endpointCanServe({ ready: false, serving: false }), false);
});

test('nodesWithEndpoint (externalTrafficPolicy: Local): only live, eligible nodes with a serving endpoint of the service', () => {
  const svc = service({ local: true });
  assert.deepEqual(announcers({ service: svc, endpointSlices: [readyOn('node-b')] }), ['node-b']);
  // discovery/v1beta1 (Kubernetes 1.20): no nodeName, the node is the hostname topology key.
  const beta = slice([{ topology: { 'kubernetes.io/hostname': 'node-c' }, conditions: { ready: true } }]);
  assert.deepEqual(announcers({ service: svc, endpointSlices: [beta] }), ['node-c']);
  // An endpoint on no node at all serves (so the service is active) but makes no node a candidate.
  assert.deepEqual(
    announcers({ service: svc, endpointSlices: [slice([{ conditions: { ready: true } }])] }),
    [],
  );
  // A not-ready endpoint's node is no candidate; the endpoint's node must also be live and not excluded.
  const mixed = slice([
    { nodeName: 'node-a', conditions: { ready: false } },
    { nodeName: 'node-b', conditions: { ready: true } },
    { nodeName: 'node-c', conditions: { ready: true } },
  ]);
  const two = announcers({ service: svc, endpointSlices: [mixed] });
  assert.deepEqual(two, [hashOwner(['node-b', 'node-c'])]);
  const w = two[0] as string;
  const other = w === 'node-b' ? 'node-c' : 'node-b';
  assert.deepEqual(
    announcers({ service: svc, endpointSlices: [mixed], live: new Set(NAMES.filter((n) => n !== w)) }),
    [other],
  );
  assert.deepEqual(
    announcers({
      service: svc,
      endpointSlices: [mixed],
      nodes: NAMES.map((n) => node(n, n === w ? { [EXCLUDE_LABEL]: '' } : {})),
    }),
    [other],
  );
  // The same slice for eTP Cluster: every node is a candidate.
  assert.deepEqual(announcers({ endpointSlices: [mixed] }), [hashOwner(NAMES)]);
});

test('poolFor (speaker/main.go): an IP in no IPAddressPool is not announced (ipNotAllowed); CIDRs and ranges, IPv4 and IPv6', () => {
  assert.equal(poolContains(['192.0.2.100-192.0.2.120'], '192.0.2.120'), true);
  assert.equal(poolContains(['192.0.2.100-192.0.2.120'], '192.0.2.121'), false);
  assert.equal(poolContains(['192.0.2.100 - 192.0.2.120'], '192.0.2.110'), true, 'spaces around the dash');
  assert.equal(poolContains(['192.0.2.64/26'], '192.0.2.100'), true);
  assert.equal(poolContains(['192.0.2.77/26'], '192.0.2.100'), true, 'host bits set: the network is meant');
  assert.equal(poolContains(['192.0.2.0/26'], '192.0.2.100'), false);
  assert.equal(poolContains(['192.0.2.100/32'], '192.0.2.100'), true);
  assert.equal(poolContains(['2001:db8::/64'], '2001:db8::100'), true);
  assert.equal(poolContains(['2001:db8::10-2001:db8::20'], '2001:db8::1f'), true);
  assert.equal(poolContains(['2001:db8::10-2001:db8::20'], '2001:db8::21'), false);
  assert.equal(poolContains(['2001:db8::/64'], '192.0.2.100'), false, 'families do not mix');
  assert.equal(poolContains(['192.0.2.120-192.0.2.100'], '192.0.2.110'), false, 'reversed range: invalid');
  assert.equal(poolContains(['192.0.2.100'], '192.0.2.100'), false, 'neither CIDR nor range: invalid');
  assert.equal(poolContains(['192.0.2.0/33'], '192.0.2.100'), false);

  assert.deepEqual(announcers({ pools: [pool('other', ['198.51.100.0/24'])] }), []);
  assert.equal(
    shouldAnnounce({ self: 'node-a', ...base({ pools: [pool('other', ['198.51.100.0/24'])] }) }).reason,
    'ipNotAllowed',
  );
  assert.deepEqual(announcers({ pools: [] }), [], 'no pool at all');
  // Every IP of the service must be in the one pool.
  const svc = service({ ips: [VIP, '2001:db8::100'] });
  assert.deepEqual(announcers({ service: svc, pools: [pool('v4', ['192.0.2.0/24'])] }), []);
  assert.deepEqual(
    announcers({ service: svc, pools: [pool('v4', ['192.0.2.0/24']), pool('v6', ['2001:db8::/64'])] }),
    [],
  );
  assert.equal(
    announcers({ service: svc, pools: [pool('both', ['192.0.2.0/24', '2001:db8::/64'])] }).length,
    1,
  );
});

test('setL2AdvertisementsToPools: an L2Advertisement names the pool, selects it by label, or (neither given) takes every pool; none → nobody announces', () => {
  const labelled = [pool('lab', ['192.0.2.100-192.0.2.120'], { tier: 'front' })];
  const one = [hashOwner(NAMES)];
  assert.deepEqual(announcers({ l2Advertisements: [] }), [], 'no L2Advertisement');
  assert.deepEqual(
    shouldAnnounce({ self: 'node-a', ...base({ l2Advertisements: [] }) }).reason,
    'noMatchingAdvertisement',
  );
  assert.deepEqual(announcers({ l2Advertisements: [ad({ ipAddressPools: ['lab'] })] }), one);
  assert.deepEqual(announcers({ l2Advertisements: [ad({ ipAddressPools: ['other'] })] }), []);
  assert.deepEqual(
    announcers({
      pools: labelled,
      l2Advertisements: [ad({ ipAddressPoolSelectors: [{ matchLabels: { tier: 'front' } }] })],
    }),
    one,
  );
  assert.deepEqual(
    announcers({
      pools: labelled,
      l2Advertisements: [ad({ ipAddressPoolSelectors: [{ matchLabels: { tier: 'back' } }] })],
    }),
    [],
    'a selector that matches no pool selects none (not all)',
  );
  assert.deepEqual(
    announcers({
      pools: labelled,
      l2Advertisements: [
        ad({ ipAddressPools: ['other'], ipAddressPoolSelectors: [{ matchLabels: { tier: 'front' } }] }),
      ],
    }),
    one,
    'names and selectors add up',
  );
  assert.deepEqual(
    announcers({ l2Advertisements: [ad({ ipAddressPools: [], ipAddressPoolSelectors: [] })] }),
    one,
  );
});

test('selectedNodes / adsMatchNodeL2: only nodes an L2Advertisement of the pool selects (nodeSelectors; none = all nodes)', () => {
  const nodes = [node('node-a', { zone: 'x' }), node('node-b', { zone: 'y' }), node('node-c', { zone: 'x' })];
  const onlyX = ad({ nodeSelectors: [{ matchLabels: { zone: 'x' } }] });
  assert.deepEqual(announcers({ nodes, l2Advertisements: [onlyX] }), [hashOwner(['node-a', 'node-c'])]);
  assert.equal(
    shouldAnnounce({ self: 'node-b', ...base({ nodes, l2Advertisements: [onlyX] }) }).reason,
    'noMatchingAdvertisement',
  );
  const exprB = ad({
    nodeSelectors: [{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['y'] }] }],
  });
  assert.deepEqual(announcers({ nodes, l2Advertisements: [exprB] }), ['node-b']);
  // Several selectors: any; several advertisements for the pool: any.
  const either = ad({ nodeSelectors: [{ matchLabels: { zone: 'y' } }, { matchLabels: { zone: 'x' } }] });
  assert.deepEqual(announcers({ nodes, l2Advertisements: [either] }), [hashOwner(NAMES)]);
  assert.deepEqual(announcers({ nodes, l2Advertisements: [onlyX, exprB] }), [hashOwner(NAMES)]);
  // An advertisement of another pool does not lend its nodes.
  const otherPool = ad({ ipAddressPools: ['other'] });
  assert.deepEqual(announcers({ nodes, l2Advertisements: [exprB, otherPool] }), ['node-b']);
});

test('metav1.LabelSelectorAsSelector: matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist) all hold', () => {
  const l = { zone: 'x', disk: 'ssd' };
  assert.equal(selectorMatches({}, l), true, 'the empty selector matches everything');
  assert.equal(selectorMatches({}, undefined), true);
  assert.equal(selectorMatches({ matchLabels: { zone: 'x' } }, l), true);
  assert.equal(selectorMatches({ matchLabels: { zone: 'x', disk: 'hdd' } }, l), false);
  const e = (operator: string, values?: string[], key = 'zone') => ({
    matchExpressions: [{ key, operator, values }],
  });
  assert.equal(selectorMatches(e('In', ['x', 'y']), l), true);
  assert.equal(selectorMatches(e('In', ['y']), l), false);
  assert.equal(selectorMatches(e('In', ['x'], 'rack'), l), false);
  assert.equal(selectorMatches(e('NotIn', ['y']), l), true);
  assert.equal(selectorMatches(e('NotIn', ['x']), l), false);
  assert.equal(selectorMatches(e('NotIn', ['x'], 'rack'), l), true, 'NotIn holds for a missing key');
  assert.equal(selectorMatches(e('Exists'), l), true);
  assert.equal(selectorMatches(e('Exists', [], 'rack'), l), false);
  assert.equal(selectorMatches(e('DoesNotExist', [], 'rack'), l), true);
  assert.equal(selectorMatches(e('DoesNotExist'), l), false);
  assert.equal(selectorMatches(e('Gt', ['1']), l), false, 'an invalid operator selects nothing');
  assert.equal(selectorMatches({ matchLabels: { zone: 'x' }, ...e('In', ['y']) }, l), false, 'ANDed');
});

test('speakersForPool (IsNodeExcludedFromBalancers, IsNetworkUnavailable): live members minus the exclude label (any value) and NetworkUnavailable=True', () => {
  const nodes = [
    node('node-a'),
    node('node-b', { [EXCLUDE_LABEL]: 'false' }),
    node('node-c', {}, true),
    node('node-d'),
    node('node-e'),
  ];
  const live = new Set(['node-a', 'node-b', 'node-c', 'node-d']);
  const all = ['node-a', 'node-b', 'node-c', 'node-d', 'node-e'];
  const d = shouldAnnounce({ self: 'node-a', ...base({ nodes, live }) });
  assert.deepEqual(
    [...d.candidates].sort(),
    ['node-a', 'node-d'],
    'node-e has a Node but is not a live member',
  );
  assert.deepEqual(announcers({ nodes, live }, all), [hashOwner(['node-a', 'node-d'])]);
  // An excluded node does not announce even for itself.
  assert.deepEqual(
    announcers({ nodes, live: new Set(['node-b', 'node-c']) }, all),
    [],
    'nobody left: the VIP is announced by no one',
  );
});

test("speakersForPool / selectedNodes: a live member without a Node object is in no L2Advertisement's node set, so it never announces", () => {
  // internal/config selectedNodes builds an advertisement's Nodes from the Node objects that exist;
  // the exclusion checks alone (nil Node: not excluded) would let it through.
  const nodes = [node('node-a'), node('node-b')];
  const d = shouldAnnounce({ self: 'node-a', ...base({ nodes }) });
  assert.deepEqual([...d.candidates].sort(), ['node-a', 'node-b']);
  assert.equal(shouldAnnounce({ self: 'node-c', ...base({ nodes }) }).reason, 'noMatchingAdvertisement');
  assert.deepEqual(announcers({ nodes }), [hashOwner(['node-a', 'node-b'])]);
});

test('UsableSpeakers (memberlist): a node that sees no live peers elects itself for every service its pools allow', () => {
  const ips = ['192.0.2.100', '192.0.2.101', '192.0.2.102', '192.0.2.103', '192.0.2.104'];
  for (const ip of ips) {
    const b = base({ service: service({ ips: [ip] }) });
    assert.equal(shouldAnnounce({ self: 'node-a', ...b, live: new Set(['node-a']) }).reason, '');
  }
  // ... but not one outside its pools.
  assert.equal(
    shouldAnnounce({
      self: 'node-a',
      ...base({ service: service({ ips: ['198.51.100.1'] }), live: new Set(['node-a']) }),
    }).reason,
    'ipNotAllowed',
  );
});

test('l2AdsForService (v0.16): an L2Advertisement with serviceSelectors applies only to the services they match', () => {
  const nodes = [node('node-a', { zone: 'x' }), node('node-b', { zone: 'y' }), node('node-c', { zone: 'y' })];
  const forFront = ad({
    serviceSelectors: [{ matchLabels: { tier: 'front' } }],
    nodeSelectors: [{ matchLabels: { zone: 'x' } }],
  });
  assert.deepEqual(
    announcers({ nodes, l2Advertisements: [forFront], service: service({ labels: { tier: 'front' } }) }),
    ['node-a'],
  );
  assert.deepEqual(
    announcers({ nodes, l2Advertisements: [forFront], service: service({ labels: { tier: 'back' } }) }),
    [],
  );
});

test('SetBalancer (speaker/main.go): not a LoadBalancer, no ingress IP, or an invalid one → not announced', () => {
  const lb = service();
  const cases: [Service, string][] = [
    [{ ...lb, spec: { type: 'ClusterIP' } }, 'notLoadBalancer'],
    [{ ...lb, status: { loadBalancer: {} } }, 'noIPAllocated'],
    [{ ...lb, status: { loadBalancer: { ingress: [{ ip: 'nonsense' }] } } }, 'invalidIP'],
    [{ ...lb, status: { loadBalancer: { ingress: [{}] } } }, 'invalidIP'],
  ];
  for (const [svc, reason] of cases) {
    assert.deepEqual(announcers({ service: svc }), []);
    assert.equal(shouldAnnounce({ self: 'node-a', ...base({ service: svc }) }).reason, reason);
  }
});

test('ShouldAnnounce per service: several services in one world, each owned by its own hash winner, every speaker agreeing', () => {
  // Addresses of the pool whose winners differ, so the services land on different nodes.
  const vips: string[] = [];
  const owners = new Set<string>();
  for (let h = 100; h <= 120 && owners.size < NAMES.length; h++) {
    const ip = `192.0.2.${h}`;
    const o = hashOwner(NAMES, ip) as string;
    if (!owners.has(o)) {
      owners.add(o);
      vips.push(ip);
    }
  }
  assert.equal(vips.length, 3);
  const services = vips.map((ip, i) => service({ name: `s${i}`, ips: [ip] }));
  const slices = services.map((s) => {
    const sl = readyOn(...NAMES);
    return { ...sl, metadata: { ...sl.metadata, labels: { 'kubernetes.io/service-name': s.metadata.name } } };
  });
  const owned = new Map<string, string[]>();
  for (const s of services) {
    const who = announcers({ service: s, endpointSlices: slices });
    assert.equal(who.length, 1, `one announcer for ${s.metadata.name}`);
    owned.set(who[0] as string, [...(owned.get(who[0] as string) ?? []), ...lbIPsOf(s)]);
  }
  assert.equal(owned.size, 3, 'three services, three different owners');
});

const lbIPsOf = (s: Service) => (s.status?.loadBalancer?.ingress ?? []).map((i) => i.ip as string);
