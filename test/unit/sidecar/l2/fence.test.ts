import { readFileSync, writeFileSync } from 'node:fs';
import t, { type Test } from 'tap';
import { fenceTablesIn, renderUnfence } from '../../../../shared/net/fence-tables.ts';
import {
  type FenceSpec,
  hexToIpv6,
  ipv6ToHex,
  parseFence,
  renderFence,
  sameFence,
  validateFence,
} from '../../../../sidecar/l2/fence.ts';

const golden = (t: Test, name: string, actual: string) => {
  const url = new URL(`../../../golden/l2/${name}`, import.meta.url);
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(url, actual);
  t.equal(actual, readFileSync(url, 'utf8'), `golden ${name} differs (UPDATE_GOLDEN=1 to accept)`);
};

const full: FenceSpec = {
  vips4: ['192.0.2.11', '192.0.2.10', '192.0.2.10'],
  vips6: ['2001:db8::10', '2001:DB8:0:0::20'],
  interfaces: ['eth1', 'eth0'],
  memberlistPorts: [7946],
};

t.test('renders the fence as one atomic replace transaction', async (t) => {
  golden(t, 'fence-full.nft', renderFence(full));
  golden(
    t,
    'fence-v4.nft',
    renderFence({ vips4: ['192.0.2.10'], vips6: [], interfaces: ['eth0'], memberlistPorts: [] }),
  );
  golden(t, 'unfence.nft', renderUnfence());
});

t.test('the fence transaction deletes before it adds, so it can never exist twice', async (t) => {
  const text = renderFence(full);
  const del = text.indexOf('delete table netdev drainguard');
  const add = text.indexOf('table netdev drainguard {\n');
  t.ok(del >= 0 && add > del);
  t.equal(text.match(/arp saddr ip @vip4/g)?.length, 2, 'one ARP drop rule per interface');
});

t.test('rejects input that could inject nft syntax, naming the field', async (t) => {
  t.throws(
    () =>
      renderFence({
        vips4: ['192.0.2.1; flush ruleset'],
        vips6: [],
        interfaces: ['eth0'],
        memberlistPorts: [],
      }),
    /vips4/,
  );
  t.strictSame(
    validateFence({ vips4: [], vips6: ['x'], interfaces: ['eth0"}'], memberlistPorts: [0] }).length,
    3,
  );
});

t.test('IPv6 to 128-bit hex and back', async (t) => {
  t.equal(ipv6ToHex('2001:db8::10'), '0x20010db8000000000000000000000010');
  t.equal(ipv6ToHex('::'), '0x00000000000000000000000000000000');
  t.equal(ipv6ToHex('::ffff:192.0.2.1'), '0x00000000000000000000ffffc0000201');
  t.equal(hexToIpv6('0x20010db8000000000000000000000010'), '2001:db8::10');
  t.equal(hexToIpv6('0x20010db8000100000000000000000001'), '2001:db8:1::1');
  t.equal(hexToIpv6('0x0'), '::');
  for (const a of ['2001:db8::1:0:0:1', '2001:db8:0:1:1:1:1:1', 'fe80::1', '2001:db8::'])
    t.equal(hexToIpv6(ipv6ToHex(a)), a);
});

t.test('reads the installed fence back from nft -j output (real nft 1.0.6 shapes)', async (t) => {
  const tables = readFileSync(new URL('../../../golden/l2/list-tables.json', import.meta.url), 'utf8');
  t.strictSame(fenceTablesIn(tables), ['inet', 'netdev']);
  const netdev = readFileSync(new URL('../../../golden/l2/list-netdev.json', import.meta.url), 'utf8');
  const inet = readFileSync(new URL('../../../golden/l2/list-inet.json', import.meta.url), 'utf8');
  const spec = parseFence([netdev, inet]);
  t.ok(spec);
  t.ok(sameFence(spec, full), JSON.stringify(spec));
  t.equal(parseFence([]), undefined);
  t.strictSame(fenceTablesIn('{"nftables":[{"metainfo":{}},{"table":{"family":"ip","name":"filter"}}]}'), []);
});

const failsafe: FenceSpec = {
  vips4: ['192.0.2.10'],
  vips6: [],
  interfaces: ['eth0'],
  memberlistPorts: [7946],
  ownAddresses: ['192.0.2.1', '2001:DB8::1', 'fe80::1c2:3ff:fe04:506'],
};

t.test('fail-safe fence: drops every ARP/NA not from the own addresses, lists no VIP', async (t) => {
  const text = renderFence(failsafe);
  golden(t, 'fence-failsafe.nft', text);
  t.match(text, /arp saddr ip != @own4 counter drop/);
  t.match(text, /@th,64,128 != @own6 counter drop/);
  // The kernel's duplicate-address probes (sender 0.0.0.0) and the unspecified :: pass.
  t.match(text, /set own4 \{ type ipv4_addr; elements = \{ 0\.0\.0\.0, 192\.0\.2\.1 \} \}/);
  t.notMatch(text, /@vip4|@vip6/);
  t.strictSame(validateFence({ ...failsafe, ownAddresses: ['192.0.2.1; flush ruleset'] }), [
    'ownAddresses: "192.0.2.1; flush ruleset" is not an IP address',
  ]);
});

t.test(
  'fail-safe fence reads back equal to what was asked (real nft 1.0.6 output), so it is not re-applied',
  async (t) => {
    const netdev = readFileSync(
      new URL('../../../golden/l2/list-netdev-failsafe.json', import.meta.url),
      'utf8',
    );
    const inet = readFileSync(new URL('../../../golden/l2/list-inet-failsafe.json', import.meta.url), 'utf8');
    const spec = parseFence([netdev, inet]);
    t.strictSame(spec, {
      vips4: [],
      vips6: [],
      interfaces: ['eth0'],
      memberlistPorts: [7946],
      ownAddresses: ['192.0.2.1', '2001:db8::1', 'fe80::1c2:3ff:fe04:506'],
    });
    t.ok(sameFence(spec, failsafe));
    t.ok(!sameFence(spec, { ...failsafe, ownAddresses: undefined }));
  },
);
