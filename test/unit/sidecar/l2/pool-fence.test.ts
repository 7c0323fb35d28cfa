// The fail-safe fence over MetalLB's address pools: the pools' entries as merged ranges
// (pool-ranges.ts), rendered as nft interval sets, and read back equal from real nft 1.0.6 output.
import { readFileSync } from 'node:fs';
import t from 'tap';
import {
  claimedVips,
  type FenceSpec,
  parseFence,
  renderFence,
  sameFence,
  validateFence,
} from '../../../../sidecar/l2/fence.ts';
import { poolRanges } from '../../../../sidecar/l2/pool-ranges.ts';

// Golden files from this renderer and from real nft 1.0.6 (`nft -j list table …` after `nft -f`).
const read = (name: string) => readFileSync(new URL(`../../../golden/l2/${name}`, import.meta.url), 'utf8');

t.test('pool entries become merged, canonical ranges; malformed ones are left out', async (t) => {
  t.strictSame(
    poolRanges([
      '192.0.2.100-192.0.2.120',
      '192.0.2.110 - 192.0.2.130',
      '192.0.2.131/32',
      '198.51.100.7/24',
      '2001:DB8::100/120',
      '2001:db8:0:0::200-2001:db8::2ff',
      '203.0.113.9',
      'bogus',
      '192.0.2.9-192.0.2.1',
      '10.0.0.0/33',
      '10.0.0.1-2001:db8::1',
    ]),
    [
      '192.0.2.100-192.0.2.131',
      '198.51.100.0-198.51.100.255',
      '203.0.113.9-203.0.113.9',
      '2001:db8::100-2001:db8::2ff',
    ],
  );
  t.strictSame(poolRanges([]), []);
});

const pools: FenceSpec = {
  vips4: ['192.0.2.10'],
  vips6: ['2001:db8::10'],
  interfaces: ['eth0'],
  memberlistPorts: [7946],
  pools: poolRanges([
    '192.0.2.100-192.0.2.120',
    '198.51.100.0/24',
    '203.0.113.7/32',
    '2001:db8::100/120',
    '2001:db8:1::/64',
  ]),
};

t.test('fail-safe fence over the pools: ARP/NA in them (and the VIPs) dropped, nothing else', async (t) => {
  const text = renderFence(pools);
  t.equal(text, read('fence-pools.nft'), 'golden fence-pools.nft');
  t.match(text, /set pool4 \{ type ipv4_addr; flags interval; elements = \{ 192\.0\.2\.100-192\.0\.2\.120, /);
  t.match(text, /arp saddr ip @pool4 counter drop/);
  t.match(text, /icmpv6 type nd-neighbor-advert @th,64,128 @pool6 counter drop/);
  t.notMatch(text, /@own4|@own6|!=/, 'no drop of everything foreign');
  t.strictSame(
    validateFence({ ...pools, pools: ['192.0.2.9-192.0.2.1', '10.0.0.1-2001:db8::1', 'x; flush ruleset'] }),
    [
      'pools: "192.0.2.9-192.0.2.1" is not an address range "first-last" of one family',
      'pools: "10.0.0.1-2001:db8::1" is not an address range "first-last" of one family',
      'pools: "x; flush ruleset" is not an address range "first-last" of one family',
    ],
  );
  t.strictSame(validateFence({ ...pools, ownAddresses: ['192.0.2.1'] }), [
    'pools and ownAddresses: a fail-safe fence uses one of them',
  ]);
});

t.test('the pool fence reads back equal (real nft 1.0.6: ranges, prefixes, single addresses)', async (t) => {
  const spec = parseFence([read('list-netdev-pools.json'), read('list-inet-pools.json')]);
  t.strictSame(spec?.pools, [
    '192.0.2.100-192.0.2.120',
    '198.51.100.0-198.51.100.255',
    '2001:db8:1::-2001:db8:1:0:ffff:ffff:ffff:ffff',
    '2001:db8::100-2001:db8::1ff',
    '203.0.113.7-203.0.113.7',
  ]);
  t.ok(sameFence(spec, pools), JSON.stringify(spec));
  t.notOk(sameFence(spec, { ...pools, pools: ['192.0.2.100-192.0.2.120'] }));
});

// The VIPs announced here, held under the fail-safe until another node claims them on the wire.
const held: FenceSpec = {
  vips4: ['192.0.2.12'],
  vips6: [],
  interfaces: ['eth0'],
  memberlistPorts: [7946],
  pools: ['192.0.2.100-192.0.2.120', '2001:db8::100-2001:db8::1ff'],
  held: ['192.0.2.10', '192.0.2.11', '2001:db8::10'],
};

t.test(
  'held VIPs: exempt from the pool drop until a claim arrives (ingress ARP, input NA), then dropped before anything else',
  async (t) => {
    const text = renderFence(held);
    t.equal(text, read('fence-held.nft'), 'golden fence-held.nft');
    t.match(
      text,
      /chain claims-eth0 \{\n\s+type filter hook ingress device "eth0"[^\n]*\n\s+arp saddr ip @held4 add @claimed4 \{ arp saddr ip \} counter\n/,
    );
    t.match(
      text,
      /chain egress-eth0 \{\n[^\n]*\n\s+arp saddr ip @claimed4 counter drop\n\s+arp saddr ip @held4 accept\n\s+arp saddr ip @vip4 counter drop\n\s+arp saddr ip @pool4 counter drop\n/,
      'claimed dropped, held accepted, only then the VIPs and pools dropped',
    );
    // Only from another host: this node's own NA looped back (multicast loopback) has an own source.
    t.match(
      text,
      /icmpv6 type nd-neighbor-advert fib saddr type != local @th,64,128 @held6 add @claimed6 \{ @th,64,128 \} counter/,
    );
    t.match(
      text,
      /@claimed6 counter drop\n\s+icmpv6 type nd-neighbor-advert @th,64,128 @held6 accept\n\s+icmpv6 type nd-neighbor-advert @th,64,128 @pool6 counter drop/,
    );
    // A VIP both dropped and held is dropped: held never widens what a fence answers.
    t.notMatch(renderFence({ ...held, held: ['192.0.2.12'] }), /@held4/);
    t.strictSame(validateFence({ ...held, held: ['x; flush ruleset'] }), [
      'held: "x; flush ruleset" is not an IP address',
    ]);
    t.strictSame(validateFence({ ...held, ownMacs: ['02:00:00:00:00:zz'] }), [
      'ownMacs: "02:00:00:00:00:zz" is not a MAC address',
    ]);
    t.ok(sameFence({ ...held, ownMacs: ['02:00:00:00:00:01'] }, held), 'the own MACs are a render detail');
    // A re-render keeps what the kernel saw claimed.
    t.match(
      renderFence({ ...held, claimed: ['192.0.2.10'] }),
      /set claimed4 \{ type ipv4_addr; flags dynamic; elements = \{ 192\.0\.2\.10 \}; \}/,
    );
  },
);

t.test(
  'held VIPs read back with what the kernel saw claimed (real nft 1.0.6, after a gratuitous ARP and an unsolicited NA arrived); the same fence all the same',
  async (t) => {
    const spec = parseFence([read('list-netdev-held.json'), read('list-inet-held.json')]);
    t.strictSame(spec?.held, ['192.0.2.10', '192.0.2.11', '2001:db8::10']);
    t.strictSame(claimedVips(spec), ['192.0.2.10', '2001:db8::10']);
    t.ok(sameFence(spec, held), 'claims do not make it another fence (no re-render that would forget them)');
    t.notOk(sameFence(spec, { ...held, held: ['192.0.2.11', '2001:db8::10'] }));
  },
);
