import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { test } from 'node:test';
import {
  type FenceSpec,
  fenceTablesIn,
  hexToIpv6,
  ipv6ToHex,
  parseFence,
  renderFence,
  renderUnfence,
  sameFence,
  validateFence,
} from '../../../sidecar/l2/fence.ts';

const golden = (name: string, actual: string) => {
  const url = new URL(`../../golden/l2/${name}`, import.meta.url);
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(url, actual);
  assert.equal(actual, readFileSync(url, 'utf8'), `golden ${name} differs (UPDATE_GOLDEN=1 to accept)`);
};

const full: FenceSpec = {
  vips4: ['192.0.2.11', '192.0.2.10', '192.0.2.10'],
  vips6: ['2001:db8::10', '2001:DB8:0:0::20'],
  interfaces: ['eth1', 'eth0'],
  memberlistPorts: [7946],
};

test('renders the fence as one atomic replace transaction', () => {
  golden('fence-full.nft', renderFence(full));
  golden(
    'fence-v4.nft',
    renderFence({ vips4: ['192.0.2.10'], vips6: [], interfaces: ['eth0'], memberlistPorts: [] }),
  );
  golden('unfence.nft', renderUnfence());
});

test('the fence transaction deletes before it adds, so it can never exist twice', () => {
  const text = renderFence(full);
  const del = text.indexOf('delete table netdev drainguard');
  const add = text.indexOf('table netdev drainguard {\n');
  assert.ok(del >= 0 && add > del);
  assert.equal(text.match(/arp saddr ip @vip4/g)?.length, 2, 'one ARP drop rule per interface');
});

test('rejects input that could inject nft syntax, naming the field', () => {
  assert.throws(
    () =>
      renderFence({
        vips4: ['192.0.2.1; flush ruleset'],
        vips6: [],
        interfaces: ['eth0'],
        memberlistPorts: [],
      }),
    /vips4/,
  );
  assert.deepEqual(
    validateFence({ vips4: [], vips6: ['x'], interfaces: ['eth0"}'], memberlistPorts: [0] }).length,
    3,
  );
});

test('IPv6 to 128-bit hex and back', () => {
  assert.equal(ipv6ToHex('2001:db8::10'), '0x20010db8000000000000000000000010');
  assert.equal(ipv6ToHex('::'), '0x00000000000000000000000000000000');
  assert.equal(ipv6ToHex('::ffff:192.0.2.1'), '0x00000000000000000000ffffc0000201');
  assert.equal(hexToIpv6('0x20010db8000000000000000000000010'), '2001:db8::10');
  assert.equal(hexToIpv6('0x20010db8000100000000000000000001'), '2001:db8:1::1');
  assert.equal(hexToIpv6('0x0'), '::');
  for (const a of ['2001:db8::1:0:0:1', '2001:db8:0:1:1:1:1:1', 'fe80::1', '2001:db8::'])
    assert.equal(hexToIpv6(ipv6ToHex(a)), a);
});

test('reads the installed fence back from nft -j output (real nft 1.0.6 shapes)', () => {
  const tables = readFileSync(new URL('../../golden/l2/list-tables.json', import.meta.url), 'utf8');
  assert.deepEqual(fenceTablesIn(tables), ['inet', 'netdev']);
  const netdev = readFileSync(new URL('../../golden/l2/list-netdev.json', import.meta.url), 'utf8');
  const inet = readFileSync(new URL('../../golden/l2/list-inet.json', import.meta.url), 'utf8');
  const spec = parseFence([netdev, inet]);
  assert.ok(spec);
  assert.ok(sameFence(spec, full), JSON.stringify(spec));
  assert.equal(parseFence([]), undefined);
  assert.deepEqual(
    fenceTablesIn('{"nftables":[{"metainfo":{}},{"table":{"family":"ip","name":"filter"}}]}'),
    [],
  );
});

const failsafe: FenceSpec = {
  vips4: ['192.0.2.10'],
  vips6: [],
  interfaces: ['eth0'],
  memberlistPorts: [7946],
  ownAddresses: ['192.0.2.1', '2001:DB8::1', 'fe80::1c2:3ff:fe04:506'],
};

test('fail-safe fence: drops every ARP/NA not from the own addresses, lists no VIP', () => {
  const text = renderFence(failsafe);
  golden('fence-failsafe.nft', text);
  assert.match(text, /arp saddr ip != @own4 counter drop/);
  assert.match(text, /@th,64,128 != @own6 counter drop/);
  // The kernel's duplicate-address probes (sender 0.0.0.0) and the unspecified :: pass.
  assert.match(text, /set own4 \{ type ipv4_addr; elements = \{ 0\.0\.0\.0, 192\.0\.2\.1 \} \}/);
  assert.doesNotMatch(text, /@vip4|@vip6/);
  assert.deepEqual(validateFence({ ...failsafe, ownAddresses: ['192.0.2.1; flush ruleset'] }), [
    'ownAddresses: "192.0.2.1; flush ruleset" is not an IP address',
  ]);
});

test('fail-safe fence reads back equal to what was asked (real nft 1.0.6 output), so it is not re-applied', () => {
  const netdev = readFileSync(new URL('../../golden/l2/list-netdev-failsafe.json', import.meta.url), 'utf8');
  const inet = readFileSync(new URL('../../golden/l2/list-inet-failsafe.json', import.meta.url), 'utf8');
  const spec = parseFence([netdev, inet]);
  assert.deepEqual(spec, {
    vips4: [],
    vips6: [],
    interfaces: ['eth0'],
    memberlistPorts: [7946],
    ownAddresses: ['192.0.2.1', '2001:db8::1', 'fe80::1c2:3ff:fe04:506'],
  });
  assert.ok(sameFence(spec, failsafe));
  assert.ok(!sameFence(spec, { ...failsafe, ownAddresses: undefined }));
});
