// The speaker simulator's election (lab/sim/speaker/election.ts) against MetalLB's rules, each
// test named after the upstream function it follows (speaker/layer2_controller.go,
// speaker/main.go, internal/config/config.go, internal/k8s/epslices, internal/k8s/nodes).
import { createHash } from 'node:crypto';
import t from 'tap';
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

t.test(
  'ShouldAnnounce (sort by sha256(node#ip)): candidates ordered by the hash of node + "#" + first LB IP, first wins',
  async (t) => {
    const expected = hashOwner(NAMES);
    t.equal(owner(NAMES, VIP), expected);
    t.equal(owner([...NAMES].reverse(), VIP), expected, 'order of input does not matter');
    t.equal(owner([], VIP), undefined);
    t.strictSame(announcers(), [expected], 'exactly one speaker announces, the hash winner');
    const d = shouldAnnounce({ self: expected as string, ...base() });
    t.equal(d.candidates[0], expected);
    t.strictSame([...d.candidates].sort(), NAMES);
  },
);

t.test(
  'ShouldAnnounce (first LB IP): a dual-stack service is elected on its first IP and announces all of them',
  async (t) => {
    const ips = ['192.0.2.101', '2001:db8::101'];
    const svc = service({ ips });
    const pools = [pool('dual', ['192.0.2.100/30', '2001:db8::100/120'])];
    const who = announcers({ service: svc, pools });
    t.strictSame(who, [hashOwner(NAMES, '192.0.2.101')]);
    t.strictSame(shouldAnnounce({ self: who[0] as string, ...base({ service: svc, pools }) }).ips, ips);
  },
);

t.test(
  "activeEndpointExists: no serving endpoint in the service's EndpointSlices → nobody announces",
  async (t) => {
    t.strictSame(announcers({ endpointSlices: [] }), []);
    const notReady = slice(NAMES.map((n) => ({ nodeName: n, conditions: { ready: false } })));
    t.strictSame(announcers({ endpointSlices: [notReady] }), []);
    // Another service's slice, or one of the same name in another namespace, does not count.
    t.strictSame(announcers({ endpointSlices: [slice([{ nodeName: 'node-a' }], 'other')] }), []);
    t.strictSame(announcers({ endpointSlices: [slice([{ nodeName: 'node-a' }], 'www', 'elsewhere')] }), []);
    // One serving endpoint anywhere (even on no node at all) is enough for eTP Cluster.
    t.strictSame(announcers({ endpointSlices: [slice([{}])] }), [hashOwner(NAMES)]);
    const one = shouldAnnounce({ self: 'node-a', ...base({ endpointSlices: [] }) });
    t.equal(one.reason, 'notOwner');
  },
);

t.test('epslices.EndpointCanServe: ready true or absent, or else serving true', async (t) => {
  t.equal(endpointCanServe(undefined), true, 'no conditions');
  t.equal(endpointCanServe({}), true, 'ready absent');
  t.equal(endpointCanServe({ ready: null }), true, 'ready null');
  t.equal(endpointCanServe({ ready: true }), true);
  t.equal(endpointCanServe({ ready: false }), false);
  t.equal(endpointCanServe({ ready: false, serving: true }), true, 'terminating but serving');
  t.equal(endpointCanServe({ ready: false, serving: false }), false);
});

t.test(
  'nodesWithEndpoint (externalTrafficPolicy: Local): only live, eligible nodes with a serving endpoint of the service',
  async (t) => {
    const svc = service({ local: true });
    t.strictSame(announcers({ service: svc, endpointSlices: [readyOn('node-b')] }), ['node-b']);
    // discovery/v1beta1 (Kubernetes 1.20): no nodeName, the node is the hostname topology key.
    const beta = slice([{ topology: { 'kubernetes.io/hostname': 'node-c' }, conditions: { ready: true } }]);
    t.strictSame(announcers({ service: svc, endpointSlices: [beta] }), ['node-c']);
    // An endpoint on no node at all serves (so the service is active) but makes no node a candidate.
    t.strictSame(
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
    t.strictSame(two, [hashOwner(['node-b', 'node-c'])]);
    const w = two[0] as string;
    const other = w === 'node-b' ? 'node-c' : 'node-b';
    t.strictSame(
      announcers({ service: svc, endpointSlices: [mixed], live: new Set(NAMES.filter((n) => n !== w)) }),
      [other],
    );
    t.strictSame(
      announcers({
        service: svc,
        endpointSlices: [mixed],
        nodes: NAMES.map((n) => node(n, n === w ? { [EXCLUDE_LABEL]: '' } : {})),
      }),
      [other],
    );
    // The same slice for eTP Cluster: every node is a candidate.
    t.strictSame(announcers({ endpointSlices: [mixed] }), [hashOwner(NAMES)]);
  },
);

t.test(
  'poolFor (speaker/main.go): an IP in no IPAddressPool is not announced (ipNotAllowed); CIDRs and ranges, IPv4 and IPv6',
  async (t) => {
    t.equal(poolContains(['192.0.2.100-192.0.2.120'], '192.0.2.120'), true);
    t.equal(poolContains(['192.0.2.100-192.0.2.120'], '192.0.2.121'), false);
    t.equal(poolContains(['192.0.2.100 - 192.0.2.120'], '192.0.2.110'), true, 'spaces around the dash');
    t.equal(poolContains(['192.0.2.64/26'], '192.0.2.100'), true);
    t.equal(poolContains(['192.0.2.77/26'], '192.0.2.100'), true, 'host bits set: the network is meant');
    t.equal(poolContains(['192.0.2.0/26'], '192.0.2.100'), false);
    t.equal(poolContains(['192.0.2.100/32'], '192.0.2.100'), true);
    t.equal(poolContains(['2001:db8::/64'], '2001:db8::100'), true);
    t.equal(poolContains(['2001:db8::10-2001:db8::20'], '2001:db8::1f'), true);
    t.equal(poolContains(['2001:db8::10-2001:db8::20'], '2001:db8::21'), false);
    t.equal(poolContains(['2001:db8::/64'], '192.0.2.100'), false, 'families do not mix');
    t.equal(poolContains(['192.0.2.120-192.0.2.100'], '192.0.2.110'), false, 'reversed range: invalid');
    t.equal(poolContains(['192.0.2.100'], '192.0.2.100'), false, 'neither CIDR nor range: invalid');
    t.equal(poolContains(['192.0.2.0/33'], '192.0.2.100'), false);

    t.strictSame(announcers({ pools: [pool('other', ['198.51.100.0/24'])] }), []);
    t.equal(
      shouldAnnounce({ self: 'node-a', ...base({ pools: [pool('other', ['198.51.100.0/24'])] }) }).reason,
      'ipNotAllowed',
    );
    t.strictSame(announcers({ pools: [] }), [], 'no pool at all');
    // Every IP of the service must be in the one pool.
    const svc = service({ ips: [VIP, '2001:db8::100'] });
    t.strictSame(announcers({ service: svc, pools: [pool('v4', ['192.0.2.0/24'])] }), []);
    t.strictSame(
      announcers({ service: svc, pools: [pool('v4', ['192.0.2.0/24']), pool('v6', ['2001:db8::/64'])] }),
      [],
    );
    t.equal(announcers({ service: svc, pools: [pool('both', ['192.0.2.0/24', '2001:db8::/64'])] }).length, 1);
  },
);

t.test(
  'setL2AdvertisementsToPools: an L2Advertisement names the pool, selects it by label, or (neither given) takes every pool; none → nobody announces',
  async (t) => {
    const labelled = [pool('lab', ['192.0.2.100-192.0.2.120'], { tier: 'front' })];
    const one = [hashOwner(NAMES)];
    t.strictSame(announcers({ l2Advertisements: [] }), [], 'no L2Advertisement');
    t.strictSame(
      shouldAnnounce({ self: 'node-a', ...base({ l2Advertisements: [] }) }).reason,
      'noMatchingAdvertisement',
    );
    t.strictSame(announcers({ l2Advertisements: [ad({ ipAddressPools: ['lab'] })] }), one);
    t.strictSame(announcers({ l2Advertisements: [ad({ ipAddressPools: ['other'] })] }), []);
    t.strictSame(
      announcers({
        pools: labelled,
        l2Advertisements: [ad({ ipAddressPoolSelectors: [{ matchLabels: { tier: 'front' } }] })],
      }),
      one,
    );
    t.strictSame(
      announcers({
        pools: labelled,
        l2Advertisements: [ad({ ipAddressPoolSelectors: [{ matchLabels: { tier: 'back' } }] })],
      }),
      [],
      'a selector that matches no pool selects none (not all)',
    );
    t.strictSame(
      announcers({
        pools: labelled,
        l2Advertisements: [
          ad({ ipAddressPools: ['other'], ipAddressPoolSelectors: [{ matchLabels: { tier: 'front' } }] }),
        ],
      }),
      one,
      'names and selectors add up',
    );
    t.strictSame(
      announcers({ l2Advertisements: [ad({ ipAddressPools: [], ipAddressPoolSelectors: [] })] }),
      one,
    );
  },
);

t.test(
  'selectedNodes / adsMatchNodeL2: only nodes an L2Advertisement of the pool selects (nodeSelectors; none = all nodes)',
  async (t) => {
    const nodes = [
      node('node-a', { zone: 'x' }),
      node('node-b', { zone: 'y' }),
      node('node-c', { zone: 'x' }),
    ];
    const onlyX = ad({ nodeSelectors: [{ matchLabels: { zone: 'x' } }] });
    t.strictSame(announcers({ nodes, l2Advertisements: [onlyX] }), [hashOwner(['node-a', 'node-c'])]);
    t.equal(
      shouldAnnounce({ self: 'node-b', ...base({ nodes, l2Advertisements: [onlyX] }) }).reason,
      'noMatchingAdvertisement',
    );
    const exprB = ad({
      nodeSelectors: [{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['y'] }] }],
    });
    t.strictSame(announcers({ nodes, l2Advertisements: [exprB] }), ['node-b']);
    // Several selectors: any; several advertisements for the pool: any.
    const either = ad({ nodeSelectors: [{ matchLabels: { zone: 'y' } }, { matchLabels: { zone: 'x' } }] });
    t.strictSame(announcers({ nodes, l2Advertisements: [either] }), [hashOwner(NAMES)]);
    t.strictSame(announcers({ nodes, l2Advertisements: [onlyX, exprB] }), [hashOwner(NAMES)]);
    // An advertisement of another pool does not lend its nodes.
    const otherPool = ad({ ipAddressPools: ['other'] });
    t.strictSame(announcers({ nodes, l2Advertisements: [exprB, otherPool] }), ['node-b']);
  },
);

t.test(
  'metav1.LabelSelectorAsSelector: matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist) all hold',
  async (t) => {
    const l = { zone: 'x', disk: 'ssd' };
    t.equal(selectorMatches({}, l), true, 'the empty selector matches everything');
    t.equal(selectorMatches({}, undefined), true);
    t.equal(selectorMatches({ matchLabels: { zone: 'x' } }, l), true);
    t.equal(selectorMatches({ matchLabels: { zone: 'x', disk: 'hdd' } }, l), false);
    const e = (operator: string, values?: string[], key = 'zone') => ({
      matchExpressions: [{ key, operator, values }],
    });
    t.equal(selectorMatches(e('In', ['x', 'y']), l), true);
    t.equal(selectorMatches(e('In', ['y']), l), false);
    t.equal(selectorMatches(e('In', ['x'], 'rack'), l), false);
    t.equal(selectorMatches(e('NotIn', ['y']), l), true);
    t.equal(selectorMatches(e('NotIn', ['x']), l), false);
    t.equal(selectorMatches(e('NotIn', ['x'], 'rack'), l), true, 'NotIn holds for a missing key');
    t.equal(selectorMatches(e('Exists'), l), true);
    t.equal(selectorMatches(e('Exists', [], 'rack'), l), false);
    t.equal(selectorMatches(e('DoesNotExist', [], 'rack'), l), true);
    t.equal(selectorMatches(e('DoesNotExist'), l), false);
    t.equal(selectorMatches(e('Gt', ['1']), l), false, 'an invalid operator selects nothing');
    t.equal(selectorMatches({ matchLabels: { zone: 'x' }, ...e('In', ['y']) }, l), false, 'ANDed');
  },
);

t.test(
  'speakersForPool (IsNodeExcludedFromBalancers, IsNetworkUnavailable): live members minus the exclude label (any value) and NetworkUnavailable=True',
  async (t) => {
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
    t.strictSame(
      [...d.candidates].sort(),
      ['node-a', 'node-d'],
      'node-e has a Node but is not a live member',
    );
    t.strictSame(announcers({ nodes, live }, all), [hashOwner(['node-a', 'node-d'])]);
    // An excluded node does not announce even for itself.
    t.strictSame(
      announcers({ nodes, live: new Set(['node-b', 'node-c']) }, all),
      [],
      'nobody left: the VIP is announced by no one',
    );
  },
);

t.test(
  "speakersForPool / selectedNodes: a live member without a Node object is in no L2Advertisement's node set, so it never announces",
  async (t) => {
    // internal/config selectedNodes builds an advertisement's Nodes from the Node objects that exist;
    // the exclusion checks alone (nil Node: not excluded) would let it through.
    const nodes = [node('node-a'), node('node-b')];
    const d = shouldAnnounce({ self: 'node-a', ...base({ nodes }) });
    t.strictSame([...d.candidates].sort(), ['node-a', 'node-b']);
    t.equal(shouldAnnounce({ self: 'node-c', ...base({ nodes }) }).reason, 'noMatchingAdvertisement');
    t.strictSame(announcers({ nodes }), [hashOwner(['node-a', 'node-b'])]);
  },
);

t.test(
  'UsableSpeakers (memberlist): a node that sees no live peers elects itself for every service its pools allow',
  async (t) => {
    const ips = ['192.0.2.100', '192.0.2.101', '192.0.2.102', '192.0.2.103', '192.0.2.104'];
    for (const ip of ips) {
      const b = base({ service: service({ ips: [ip] }) });
      t.equal(shouldAnnounce({ self: 'node-a', ...b, live: new Set(['node-a']) }).reason, '');
    }
    // ... but not one outside its pools.
    t.equal(
      shouldAnnounce({
        self: 'node-a',
        ...base({ service: service({ ips: ['198.51.100.1'] }), live: new Set(['node-a']) }),
      }).reason,
      'ipNotAllowed',
    );
  },
);

t.test(
  'l2AdsForService (v0.16): an L2Advertisement with serviceSelectors applies only to the services they match',
  async (t) => {
    const nodes = [
      node('node-a', { zone: 'x' }),
      node('node-b', { zone: 'y' }),
      node('node-c', { zone: 'y' }),
    ];
    const forFront = ad({
      serviceSelectors: [{ matchLabels: { tier: 'front' } }],
      nodeSelectors: [{ matchLabels: { zone: 'x' } }],
    });
    t.strictSame(
      announcers({ nodes, l2Advertisements: [forFront], service: service({ labels: { tier: 'front' } }) }),
      ['node-a'],
    );
    t.strictSame(
      announcers({ nodes, l2Advertisements: [forFront], service: service({ labels: { tier: 'back' } }) }),
      [],
    );
  },
);

t.test(
  'SetBalancer (speaker/main.go): not a LoadBalancer, no ingress IP, or an invalid one → not announced',
  async (t) => {
    const lb = service();
    const cases: [Service, string][] = [
      [{ ...lb, spec: { type: 'ClusterIP' } }, 'notLoadBalancer'],
      [{ ...lb, status: { loadBalancer: {} } }, 'noIPAllocated'],
      [{ ...lb, status: { loadBalancer: { ingress: [{ ip: 'nonsense' }] } } }, 'invalidIP'],
      [{ ...lb, status: { loadBalancer: { ingress: [{}] } } }, 'invalidIP'],
    ];
    for (const [svc, reason] of cases) {
      t.strictSame(announcers({ service: svc }), []);
      t.equal(shouldAnnounce({ self: 'node-a', ...base({ service: svc }) }).reason, reason);
    }
  },
);

t.test(
  'ShouldAnnounce per service: several services in one world, each owned by its own hash winner, every speaker agreeing',
  async (t) => {
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
    t.equal(vips.length, 3);
    const services = vips.map((ip, i) => service({ name: `s${i}`, ips: [ip] }));
    const slices = services.map((s) => {
      const sl = readyOn(...NAMES);
      return {
        ...sl,
        metadata: { ...sl.metadata, labels: { 'kubernetes.io/service-name': s.metadata.name } },
      };
    });
    const owned = new Map<string, string[]>();
    for (const s of services) {
      const who = announcers({ service: s, endpointSlices: slices });
      t.equal(who.length, 1, `one announcer for ${s.metadata.name}`);
      owned.set(who[0] as string, [...(owned.get(who[0] as string) ?? []), ...lbIPsOf(s)]);
    }
    t.equal(owned.size, 3, 'three services, three different owners');
  },
);

const lbIPsOf = (s: Service) => (s.status?.loadBalancer?.ingress ?? []).map((i) => i.ip as string);

t.test(
  'speakersForPool with --ignore-exclude-lb (`!c.ignoreExcludeLB && IsNodeExcludedFromBalancers`): the exclude label takes no node out, NetworkUnavailable still does',
  async (t) => {
    const nodes = [node('node-a', { [EXCLUDE_LABEL]: '' }), node('node-b'), node('node-c', {}, true)];
    const honoured = shouldAnnounce({ self: 'node-a', ...base({ nodes }) });
    t.strictSame(honoured.candidates, ['node-b'], 'without the flag: only node-b');
    const ignored = shouldAnnounce({ self: 'node-a', ...base({ nodes, ignoreExcludeLb: true }) });
    t.strictSame([...ignored.candidates].sort(), ['node-a', 'node-b'], 'with it: the labelled node stays');
    // The owner with every node eligible keeps its VIPs when labelled: nothing moves.
    const w = hashOwner(NAMES) as string;
    const labelled = NAMES.map((n) => node(n, n === w ? { [EXCLUDE_LABEL]: '' } : {}));
    t.strictSame(announcers({ nodes: labelled, ignoreExcludeLb: true }), [w]);
    t.not(announcers({ nodes: labelled })[0], w);
  },
);

t.test(
  'ShouldAnnounce for a dual-stack service: elected on the first LB IP, both families announced together',
  async (t) => {
    const ips = ['192.0.2.101', '2001:db8::101'];
    const svc = service({ ips });
    const pools = [pool('lab', ['192.0.2.100-192.0.2.120', '2001:db8::100-2001:db8::120'])];
    const who = announcers({ service: svc, pools });
    t.strictSame(who, [hashOwner(NAMES, ips[0])]);
    t.strictSame(shouldAnnounce({ self: who[0] as string, ...base({ service: svc, pools }) }).ips, ips);
    // An IPv6-only service is elected on its IPv6 address.
    const v6 = service({ name: 'v6', ips: ['2001:db8::102'] });
    t.strictSame(
      announcers({ service: v6, pools, endpointSlices: [slice(readyOn(...NAMES).endpoints ?? [], 'v6')] }),
      [hashOwner(NAMES, '2001:db8::102')],
    );
  },
);

t.test(
  'ipAdvertisementFor: the winner announces on the interfaces its advertisements selecting it list, together; every interface (none listed) as soon as one lists none',
  async (t) => {
    const who = hashOwner(NAMES) as string;
    const decide = (ads: L2Advertisement[]) =>
      shouldAnnounce({ self: who, ...base({ l2Advertisements: ads }) });
    t.strictSame(decide([ad()]).interfaces, [], "MetalLB's default: every interface");
    t.strictSame(decide([ad({ interfaces: ['eth1'] })]).interfaces, ['eth1']);
    t.strictSame(
      decide([ad({ interfaces: ['eth2'] }), ad({ interfaces: ['eth1', 'eth2'] })]).interfaces,
      ['eth1', 'eth2'],
      'the union',
    );
    t.strictSame(decide([ad({ interfaces: ['eth1'] }), ad()]).interfaces, [], 'one all-interfaces wins');
    // An advertisement that does not select this node adds nothing.
    const elsewhere = ad({
      interfaces: ['eth9'],
      nodeSelectors: [{ matchLabels: { 'kubernetes.io/hostname': 'nowhere' } }],
    });
    t.strictSame(decide([ad({ interfaces: ['eth1'] }), elsewhere]).interfaces, ['eth1']);
    const loser = NAMES.find((n) => n !== who) as string;
    t.strictSame(
      shouldAnnounce({ self: loser, ...base({ l2Advertisements: [ad({ interfaces: ['eth1'] })] }) })
        .interfaces,
      [],
      'not announcing: none',
    );
  },
);
