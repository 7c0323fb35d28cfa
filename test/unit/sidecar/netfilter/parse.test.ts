import t from 'tap';
import {
  canonicalIp,
  classify,
  ListingError,
  normalizeMac,
  parseFlavour,
  parseListing,
  ruleKey,
} from '../../../../sidecar/netfilter/ebtables.ts';
import {
  parseAddrs,
  parseFdb,
  parseNeighbours,
  parseRoutes,
  routeDevice,
} from '../../../../sidecar/netfilter/hoststate.ts';
import { alignHandles, parseNftTable } from '../../../../sidecar/netfilter/nfthandles.ts';
import { azureNodeFile as golden } from './azure-node.ts';

t.test('ebtables flavour and MACs', async (t) => {
  t.test('detects the flavour from ebtables -V', async (t) => {
    t.equal(parseFlavour('ebtables 1.8.9 (nf_tables)'), 'nft');
    t.equal(parseFlavour('ebtables 1.8.9 (legacy)'), 'legacy');
    t.equal(parseFlavour('ebtables v2.0.10-4 (December 2011)'), 'legacy');
    t.equal(parseFlavour('something else'), undefined);
  });

  t.test('compares MACs as bytes: legacy drops leading zeros', async (t) => {
    t.equal(normalizeMac('0:d:3a:30:47:42'), '000d3a304742');
    t.equal(normalizeMac('00:0D:3A:30:47:42'), '000d3a304742');
    t.equal(normalizeMac('0:d:3a:30:47'), undefined);
    t.equal(normalizeMac('0:d:3a:30:47:4g'), undefined);
    t.equal(normalizeMac('000:d:3a:30:47:42'), undefined);
  });

  t.test('canonicalizes IPv6 text', async (t) => {
    t.equal(canonicalIp('2001:DB8:1:0:0:0:0:13'), '2001:db8:1::13');
    t.equal(canonicalIp('198.51.100.1'), '198.51.100.1');
  });
});

t.test('listing parser', async (t) => {
  t.test('parses the recorded nft listing of the azure-vnet layout', async (t) => {
    const l = parseListing(golden('nat-nft.txt'));
    t.equal(l.table, 'nat');
    t.strictSame(
      l.chains.map((c) => [c.name, c.entries]),
      [
        ['PREROUTING', 19],
        ['OUTPUT', 0],
        ['POSTROUTING', 1],
      ],
    );
    const perPod = l.rules.filter((r) => r.perPod);
    // 19 PREROUTING rules: broadcast dnat, az+, 802_1Q are not per-pod shapes; the rest are.
    t.equal(perPod.length, 16);
    const r = l.rules.find((x) => x.spec.includes('--ip6-dst 2001:db8:1::13'))!;
    t.strictSame(r.perPod, {
      kind: 'dnat',
      family: 6,
      ip: '2001:db8:1::13',
      mac: '02aa00000013',
      inIface: 'eth0',
    });
    t.equal(l.rules.find((x) => x.chain === 'POSTROUTING')?.perPod, undefined);
  });

  t.test('gives the legacy listing (zero-stripped MACs) the same rule keys as the nft one', async (t) => {
    const nft = parseListing(golden('nat-nft.txt'));
    const legacy = parseListing(golden('nat-legacy.txt'));
    t.strictSame(
      legacy.rules.map(ruleKey).filter((k) => k.includes('|arpreply|') || k.includes('|dnat|')),
      nft.rules.map(ruleKey).filter((k) => k.includes('|arpreply|') || k.includes('|dnat|')),
    );
    t.ok(
      legacy.rules.some((x) => x.spec.includes('2:aa:0:0:0:12')),
      'legacy spec kept verbatim for -D',
    );
  });

  t.test(
    'reads legacy spellings: rule numbers, counters, /32 and /128 masks, explicit targets',
    async (t) => {
      const l = parseListing(golden('legacy-extra.txt'));
      const [a, b, c, d, e, f] = l.rules;
      t.equal(
        a!.spec,
        '-p ARP --arp-op Request --arp-ip-dst 198.51.100.12 -j arpreply --arpreply-mac 2:aa:0:0:0:12',
      );
      t.equal(a!.perPod?.mac, '02aa00000012');
      t.equal(b!.perPod?.ip, '198.51.100.12');
      t.equal(c!.perPod?.kind, 'arpreply');
      t.equal(d!.perPod?.ip, '2001:db8:1::13');
      t.equal(e!.perPod, undefined, 'a /24 is not one pod');
      t.equal(f!.perPod?.mac, '000d3a000001');
    },
  );

  t.test('rejects what is not a listing, and inconsistent entry counts', async (t) => {
    t.throws(() => parseListing('hello\n'), ListingError);
    t.throws(
      () =>
        parseListing(
          'Bridge table: nat\n\nBridge chain: PREROUTING, entries: 2, policy: ACCEPT\n-j ACCEPT\n',
        ),
      /header says 2 entries, listed 1/,
    );
  });

  t.test('classifies only the exact per-pod shapes', async (t) => {
    const c = (spec: string, chain = 'PREROUTING', table = 'nat') =>
      classify({ table, chain, tokens: spec.split(' ') });
    const ok =
      '-p ARP --arp-op Request --arp-ip-dst 198.51.100.5 -j arpreply --arpreply-mac 02:00:00:00:00:05';
    t.ok(c(ok));
    t.equal(c(ok, 'OUTPUT'), undefined);
    t.equal(c(ok, 'PREROUTING', 'broute'), undefined);
    t.equal(c(ok.replace('Request', 'Reply')), undefined);
    t.equal(c(`${ok} --among-dst 02:00:00:00:00:01`), undefined);
    t.equal(c(ok.replace('02:00', '03:00')), undefined, 'group MAC');
    t.equal(c(`-i az+ ${ok}`), undefined, 'wildcard interface');
    t.equal(c(`-i ! eth0 ${ok}`), undefined);
    t.equal(
      c('-p IPv4 -i eth0 --ip-dst 198.51.100.5 -j dnat --to-dst ff:ff:ff:ff:ff:ff --dnat-target ACCEPT'),
      undefined,
    );
    t.equal(
      c('-p IPv4 -i eth0 --ip-dst 198.51.100.5 -j dnat --to-dst 02:00:00:00:00:05 --dnat-target ACCEPT')
        ?.kind,
      'dnat',
    );
    t.equal(c('-p IPv6 -i eth0 --ip-dst 198.51.100.5 -j dnat --to-dst 02:00:00:00:00:05'), undefined);
    t.equal(
      c('-p IPv4 --ip-dst 198.51.100.5 --ip-dst 198.51.100.6 -j dnat --to-dst 02:00:00:00:00:05'),
      undefined,
    );
  });
});

t.test('host state parsers', async (t) => {
  t.test('reads ip -j neigh, addr, route and bridge fdb output', async (t) => {
    const n = parseNeighbours(golden('neigh.json'));
    t.strictSame(
      n.find((x) => x.ip === '198.51.100.17'),
      { ip: '198.51.100.17', dev: 'azure0', states: ['FAILED'] },
    );
    t.equal(n.find((x) => x.ip === '2001:db8:1::13')?.mac, '02aa00000013');
    const a = parseAddrs(golden('addr.json'));
    t.ok(a.find((i) => i.name === 'azure0')?.ips.includes('192.0.2.10'));
    const f = parseFdb(golden('fdb.json'));
    t.ok(f.length > 0);
    const routes = [...parseRoutes(golden('route4.json'), 4), ...parseRoutes(golden('route6.json'), 6)];
    t.equal(routeDevice(routes, '198.51.100.13'), 'lxc13');
    t.equal(routeDevice(routes, '198.51.100.12'), 'azure0');
    t.equal(routeDevice(routes, '2001:db8:1::13'), 'lxc13');
    t.equal(routeDevice(routes, '2001:db8:1::99'), 'azure0');
    t.equal(routeDevice(routes, '203.0.113.1'), undefined);
    t.throws(() => parseNeighbours('not json'), /not JSON/);
  });

  t.test('longest prefix wins, then the lower metric; default routes match everything', async (t) => {
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
    t.equal(routeDevice(routes, '198.18.1.7'), 'c');
    t.equal(routeDevice(routes, '198.19.0.1'), 'b');
    t.equal(routeDevice(routes, '198.18.2.1'), 'd');
    t.equal(routeDevice(routes, '203.0.113.9'), 'eth0');
  });
});

t.test('nft handle alignment', async (t) => {
  const eb = () => parseListing(golden('nat-nft.txt')).rules;
  t.test('ties each listed rule to its handle on the recorded layout', async (t) => {
    const table = parseNftTable(golden('nft-a.txt'));
    t.equal(table.tableHandle, 1);
    const handles = alignHandles(eb(), table, table);
    t.strictSame(
      handles,
      Array.from({ length: 19 }, (_, i) => i + 2),
    );
  });

  t.test('refuses when the chain changed between the two listings, or positions disagree', async (t) => {
    const text = golden('nft-a.txt');
    const table = parseNftTable(text);
    const changed = parseNftTable(text.replace('# handle 20', '# handle 23'));
    t.match(String(alignHandles(eb(), table, changed)), /changed while it was being listed/);
    const lines = text.split('\n');
    const missing = lines.filter((l) => !l.endsWith('# handle 9')).join('\n');
    t.match(
      String(alignHandles(eb(), parseNftTable(missing), parseNftTable(missing))),
      /nft lists 18 rules, ebtables 19/,
    );
    // Swap two rules: an arpreply where a dnat should be.
    const i = lines.findIndex((l) => l.endsWith('# handle 11'));
    const swapped = [...lines];
    [swapped[i], swapped[i + 1]] = [swapped[i + 1]!, swapped[i]!];
    const s = parseNftTable(swapped.join('\n'));
    t.match(String(alignHandles(eb(), s, s)), /position 10: target differs/);
    // Same shape, other data: a dnat's MAC differs.
    const other = parseNftTable(
      text.replace('set 2:aa:0:0:0:12 accept # handle 12', 'set 2:aa:0:0:0:99 accept # handle 12'),
    );
    t.match(String(alignHandles(eb(), other, other)), /position 11: nft shows/);
    t.throws(() => parseNftTable('table ip filter { # handle 3\n}'), /no "table bridge nat/);
  });
});
