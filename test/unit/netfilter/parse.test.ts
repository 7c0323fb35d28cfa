import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import {
  canonicalIp,
  classify,
  ListingError,
  normalizeMac,
  parseFlavour,
  parseListing,
  ruleKey,
} from '../../../sidecar/netfilter/ebtables.ts';
import {
  parseAddrs,
  parseFdb,
  parseNeighbours,
  parseRoutes,
  routeDevice,
} from '../../../sidecar/netfilter/hoststate.ts';
import { alignHandles, parseNftTable } from '../../../sidecar/netfilter/nfthandles.ts';

const golden = (f: string) =>
  readFileSync(new URL(`../../golden/netfilter/azure-node/${f}`, import.meta.url), 'utf8');

describe('ebtables flavour and MACs', () => {
  it('detects the flavour from ebtables -V', () => {
    assert.equal(parseFlavour('ebtables 1.8.9 (nf_tables)'), 'nft');
    assert.equal(parseFlavour('ebtables 1.8.9 (legacy)'), 'legacy');
    assert.equal(parseFlavour('ebtables v2.0.10-4 (December 2011)'), 'legacy');
    assert.equal(parseFlavour('something else'), undefined);
  });

  it('compares MACs as bytes: legacy drops leading zeros', () => {
    assert.equal(normalizeMac('0:d:3a:30:47:42'), '000d3a304742');
    assert.equal(normalizeMac('00:0D:3A:30:47:42'), '000d3a304742');
    assert.equal(normalizeMac('0:d:3a:30:47'), undefined);
    assert.equal(normalizeMac('0:d:3a:30:47:4g'), undefined);
    assert.equal(normalizeMac('000:d:3a:30:47:42'), undefined);
  });

  it('canonicalizes IPv6 text', () => {
    assert.equal(canonicalIp('2001:DB8:1:0:0:0:0:13'), '2001:db8:1::13');
    assert.equal(canonicalIp('198.51.100.1'), '198.51.100.1');
  });
});

describe('listing parser', () => {
  it('parses the recorded nft listing of the azure-vnet layout', () => {
    const l = parseListing(golden('nat-nft.txt'));
    assert.equal(l.table, 'nat');
    assert.deepEqual(
      l.chains.map((c) => [c.name, c.entries]),
      [
        ['PREROUTING', 19],
        ['OUTPUT', 0],
        ['POSTROUTING', 1],
      ],
    );
    const perPod = l.rules.filter((r) => r.perPod);
    // 19 PREROUTING rules: broadcast dnat, az+, 802_1Q are not per-pod shapes; the rest are.
    assert.equal(perPod.length, 16);
    const r = l.rules.find((x) => x.spec.includes('--ip6-dst 2001:db8:1::13'))!;
    assert.deepEqual(r.perPod, {
      kind: 'dnat',
      family: 6,
      ip: '2001:db8:1::13',
      mac: '02aa00000013',
      inIface: 'eth0',
    });
    assert.equal(l.rules.find((x) => x.chain === 'POSTROUTING')?.perPod, undefined);
  });

  it('gives the legacy listing (zero-stripped MACs) the same rule keys as the nft one', () => {
    const nft = parseListing(golden('nat-nft.txt'));
    const legacy = parseListing(golden('nat-legacy.txt'));
    assert.deepEqual(
      legacy.rules.map(ruleKey).filter((k) => k.includes('|arpreply|') || k.includes('|dnat|')),
      nft.rules.map(ruleKey).filter((k) => k.includes('|arpreply|') || k.includes('|dnat|')),
    );
    assert.ok(
      legacy.rules.some((x) => x.spec.includes('2:aa:0:0:0:12')),
      'legacy spec kept verbatim for -D',
    );
  });

  it('reads legacy spellings: rule numbers, counters, /32 and /128 masks, explicit targets', () => {
    const l = parseListing(golden('legacy-extra.txt'));
    const [a, b, c, d, e, f] = l.rules;
    assert.equal(
      a!.spec,
      '-p ARP --arp-op Request --arp-ip-dst 198.51.100.12 -j arpreply --arpreply-mac 2:aa:0:0:0:12',
    );
    assert.equal(a!.perPod?.mac, '02aa00000012');
    assert.equal(b!.perPod?.ip, '198.51.100.12');
    assert.equal(c!.perPod?.kind, 'arpreply');
    assert.equal(d!.perPod?.ip, '2001:db8:1::13');
    assert.equal(e!.perPod, undefined, 'a /24 is not one pod');
    assert.equal(f!.perPod?.mac, '000d3a000001');
  });

  it('rejects what is not a listing, and inconsistent entry counts', () => {
    assert.throws(() => parseListing('hello\n'), ListingError);
    assert.throws(
      () =>
        parseListing(
          'Bridge table: nat\n\nBridge chain: PREROUTING, entries: 2, policy: ACCEPT\n-j ACCEPT\n',
        ),
      /header says 2 entries, listed 1/,
    );
  });

  it('classifies only the exact per-pod shapes', () => {
    const c = (spec: string, chain = 'PREROUTING', table = 'nat') =>
      classify({ table, chain, tokens: spec.split(' ') });
    const ok =
      '-p ARP --arp-op Request --arp-ip-dst 198.51.100.5 -j arpreply --arpreply-mac 02:00:00:00:00:05';
    assert.ok(c(ok));
    assert.equal(c(ok, 'OUTPUT'), undefined);
    assert.equal(c(ok, 'PREROUTING', 'broute'), undefined);
    assert.equal(c(ok.replace('Request', 'Reply')), undefined);
    assert.equal(c(`${ok} --among-dst 02:00:00:00:00:01`), undefined);
    assert.equal(c(ok.replace('02:00', '03:00')), undefined, 'group MAC');
    assert.equal(c(`-i az+ ${ok}`), undefined, 'wildcard interface');
    assert.equal(c(`-i ! eth0 ${ok}`), undefined);
    assert.equal(
      c('-p IPv4 -i eth0 --ip-dst 198.51.100.5 -j dnat --to-dst ff:ff:ff:ff:ff:ff --dnat-target ACCEPT'),
      undefined,
    );
    assert.equal(
      c('-p IPv4 -i eth0 --ip-dst 198.51.100.5 -j dnat --to-dst 02:00:00:00:00:05 --dnat-target ACCEPT')
        ?.kind,
      'dnat',
    );
    assert.equal(c('-p IPv6 -i eth0 --ip-dst 198.51.100.5 -j dnat --to-dst 02:00:00:00:00:05'), undefined);
    assert.equal(
      c('-p IPv4 --ip-dst 198.51.100.5 --ip-dst 198.51.100.6 -j dnat --to-dst 02:00:00:00:00:05'),
      undefined,
    );
  });
});

describe('host state parsers', () => {
  it('reads ip -j neigh, addr, route and bridge fdb output', () => {
    const n = parseNeighbours(golden('neigh.json'));
    assert.deepEqual(
      n.find((x) => x.ip === '198.51.100.17'),
      { ip: '198.51.100.17', dev: 'azure0', states: ['FAILED'] },
    );
    assert.equal(n.find((x) => x.ip === '2001:db8:1::13')?.mac, '02aa00000013');
    const a = parseAddrs(golden('addr.json'));
    assert.ok(a.find((i) => i.name === 'azure0')?.ips.includes('192.0.2.10'));
    const f = parseFdb(golden('fdb.json'));
    assert.ok(f.length > 0);
    const routes = [...parseRoutes(golden('route4.json'), 4), ...parseRoutes(golden('route6.json'), 6)];
    assert.equal(routeDevice(routes, '198.51.100.13'), 'lxc13');
    assert.equal(routeDevice(routes, '198.51.100.12'), 'azure0');
    assert.equal(routeDevice(routes, '2001:db8:1::13'), 'lxc13');
    assert.equal(routeDevice(routes, '2001:db8:1::99'), 'azure0');
    assert.equal(routeDevice(routes, '203.0.113.1'), undefined);
    assert.throws(() => parseNeighbours('not json'), /not JSON/);
  });

  it('longest prefix wins, then the lower metric; default routes match everything', () => {
    const routes = parseRoutes(
      JSON.stringify([
        { dst: 'default', dev: 'eth0' },
        { dst: '198.18.0.0/15', dev: 'a', metric: 10 },
        { dst: '198.18.0.0/15', dev: 'b', metric: 5 },
        { dst: '198.18.1.0/24', dev: 'c' },
        { type: 'blackhole', dst: '198.18.1.7' },
        { dst: '198.18.2.0/24', nexthops: [{ dev: 'd' }, { dev: 'e' }] },
      ]),
      4,
    );
    assert.equal(routeDevice(routes, '198.18.1.7'), 'c');
    assert.equal(routeDevice(routes, '198.19.0.1'), 'b');
    assert.equal(routeDevice(routes, '198.18.2.1'), 'd');
    assert.equal(routeDevice(routes, '203.0.113.9'), 'eth0');
  });
});

describe('nft handle alignment', () => {
  const eb = () => parseListing(golden('nat-nft.txt')).rules;
  it('ties each listed rule to its handle on the recorded layout', () => {
    const t = parseNftTable(golden('nft-a.txt'));
    assert.equal(t.tableHandle, 1);
    const handles = alignHandles(eb(), t, t);
    assert.deepEqual(
      handles,
      Array.from({ length: 19 }, (_, i) => i + 2),
    );
  });

  it('refuses when the chain changed between the two listings, or positions disagree', () => {
    const text = golden('nft-a.txt');
    const t = parseNftTable(text);
    const changed = parseNftTable(text.replace('# handle 20', '# handle 23'));
    assert.match(String(alignHandles(eb(), t, changed)), /changed while it was being listed/);
    const lines = text.split('\n');
    const missing = lines.filter((l) => !l.endsWith('# handle 9')).join('\n');
    assert.match(
      String(alignHandles(eb(), parseNftTable(missing), parseNftTable(missing))),
      /nft lists 18 rules, ebtables 19/,
    );
    // Swap two rules: an arpreply where a dnat should be.
    const i = lines.findIndex((l) => l.endsWith('# handle 11'));
    const swapped = [...lines];
    [swapped[i], swapped[i + 1]] = [swapped[i + 1]!, swapped[i]!];
    const s = parseNftTable(swapped.join('\n'));
    assert.match(String(alignHandles(eb(), s, s)), /position 10: target differs/);
    // Same shape, other data: a dnat's MAC differs.
    const other = parseNftTable(
      text.replace('set 2:aa:0:0:0:12 accept # handle 12', 'set 2:aa:0:0:0:99 accept # handle 12'),
    );
    assert.match(String(alignHandles(eb(), other, other)), /position 11: nft shows/);
    assert.throws(() => parseNftTable('table ip filter { # handle 3\n}'), /no "table bridge nat/);
  });
});
