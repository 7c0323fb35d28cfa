// The nft fence on a real kernel: what it drops on the wire, what it lets through, and that
// applying it twice changes nothing. The node's eth0, and another host across it (peer0).
import t from 'tap';
import { renderUnfence } from '../../../shared/net/fence-tables.ts';
import { parseFence, renderFence } from '../../../sidecar/l2/fence.ts';
import { arpFrom, framesSeen, type Host, linkedHosts, NA_FILTER, WIRE } from './fence-wire.ts';

t.test('nft fence on the wire', async (t) => {
  let ns: Host;
  let far: Host;
  const nft = (args: string[], input?: string) =>
    ns.run(['nft', ...args], input === undefined ? {} : { input });
  /** Frames seen on the far end of the veth while `send` runs. */
  const seen = (filter: string, send: () => Promise<unknown>) =>
    framesSeen({ ns: far, iface: 'peer0' }, { ns, iface: 'eth0' }, filter, send);
  const counters = async () => {
    const text = await nft(['list', 'ruleset']);
    return [...text.matchAll(/counter packets (\d+)/g)].map((m) => Number(m[1]));
  };

  t.before(async () => {
    ({ node: ns, far } = await linkedHosts('fence'));
  });
  t.teardown(async () => {
    await ns?.destroy();
    await far?.destroy();
  });

  t.test('ARP (reply and gratuitous) from a VIP and NAs for a VIPv6 are dropped; others pass', async (t) => {
    const garp = (vip: string) => ns.run(['python3', WIRE, 'send-garp', 'eth0', vip]);
    const na = (target: string) => ns.run(['python3', WIRE, 'send-na', 'eth0', target]);
    t.ok((await seen('arp', () => garp('192.0.2.10'))) >= 2, 'without a fence the GARP is on the wire');
    const spec = {
      vips4: ['192.0.2.10'],
      vips6: ['2001:db8::10'],
      interfaces: ['eth0'],
      memberlistPorts: [],
    };
    await nft(['-f', '-'], renderFence(spec));
    t.equal(await seen('arp', () => garp('192.0.2.10')), 0, 'fenced VIP: no ARP on the wire');
    t.ok((await seen('arp', () => garp('192.0.2.11'))) >= 2, 'another address still announces');
    t.equal(await seen('icmp6 and ip6[40] == 136', () => na('2001:db8::10')), 0, 'fenced VIPv6: no NA');
    t.ok((await seen('icmp6 and ip6[40] == 136', () => na('2001:db8::11'))) >= 1, 'other NAs pass');
    const c = await counters();
    t.ok(
      c.some((n) => n >= 4),
      `the ARP drop counter counted request+reply twice: ${c}`,
    );
    // Applying the same fence again replaces it: one table, one rule, state read back equal.
    await nft(['-f', '-'], renderFence(spec));
    const ruleset = await nft(['list', 'ruleset']);
    t.equal((ruleset.match(/arp saddr ip @vip4/g) ?? []).length, 1);
    const tables = JSON.parse(await nft(['-j', 'list', 'tables'])) as { nftables: { table?: unknown }[] };
    t.equal(tables.nftables.filter((i) => i.table).length, 2);
    const back = parseFence([
      await nft(['-j', 'list', 'table', 'netdev', 'drainguard']),
      await nft(['-j', 'list', 'table', 'inet', 'drainguard']),
    ]);
    t.strictSame(back, { ...spec, vips6: ['2001:db8::10'] });
    await nft(['-f', '-'], renderUnfence());
    await nft(['-f', '-'], renderUnfence());
    t.equal((await nft(['list', 'ruleset'])).trim(), '');
  });

  t.test(
    "fail-safe held VIPs: answered until another node's gratuitous ARP or unsolicited NA claims them, then dropped at once by the kernel; the rest of the pool dropped throughout",
    async (t) => {
      // Sent by this node (eth0), or by the other host across the link (peer0).
      const from = (dev: string) => (dev === 'peer0' ? far : ns);
      const garp = (vip: string, dev = 'eth0') => from(dev).run(['python3', WIRE, 'send-garp', dev, vip]);
      const na = (target: string, dev = 'eth0') => from(dev).run(['python3', WIRE, 'send-na', dev, target]);
      const arpOf = arpFrom;
      const naOf = NA_FILTER;
      const spec = {
        vips4: [],
        vips6: [],
        interfaces: ['eth0'],
        memberlistPorts: [],
        pools: ['192.0.2.5-192.0.2.20', '2001:db8::5-2001:db8::20'],
        held: ['192.0.2.10', '2001:db8::10'],
      };
      await nft(['-f', '-'], renderFence(spec));
      t.ok((await seen(arpOf('192.0.2.10'), () => garp('192.0.2.10'))) >= 2, 'held VIP: still answered');
      t.equal(await seen(arpOf('192.0.2.11'), () => garp('192.0.2.11')), 0, 'the rest of the pool: dropped');
      t.ok((await seen(naOf, () => na('2001:db8::10'))) >= 1, 'held VIPv6: NAs still go out');
      t.equal(await seen(naOf, () => na('2001:db8::11')), 0, 'the rest of the IPv6 pool: dropped');
      // A frame that carries a MAC of this node's own (reflected back by a hairpin port or a bond)
      // claims nothing: peer0's MAC stands in for it here.
      const peerMac = (
        JSON.parse(await far.run(['ip', '-j', 'link', 'show', 'peer0'])) as { address: string }[]
      )[0]?.address;
      await nft(['-f', '-'], renderFence({ ...spec, ownMacs: [peerMac ?? ''] }));
      await garp('192.0.2.10', 'peer0');
      await na('2001:db8::10', 'peer0');
      t.ok(
        (await seen(arpOf('192.0.2.10'), () => garp('192.0.2.10'))) >= 2,
        'an own reflected frame: still answered',
      );
      t.ok((await seen(naOf, () => na('2001:db8::10'))) >= 1, 'an own reflected NA: still answered');
      await nft(['-f', '-'], renderFence(spec));
      // Another node takes them over: its takeover frames arrive on eth0 (sent from the far end).
      await garp('192.0.2.10', 'peer0');
      await na('2001:db8::10', 'peer0');
      t.equal(await seen(arpOf('192.0.2.10'), () => garp('192.0.2.10')), 0, 'claimed: dropped at once');
      t.equal(await seen(naOf, () => na('2001:db8::10')), 0, 'claimed VIPv6: dropped at once');
      const back = parseFence([
        await nft(['-j', 'list', 'table', 'netdev', 'drainguard']),
        await nft(['-j', 'list', 'table', 'inet', 'drainguard']),
      ]);
      t.strictSame(back?.claimed, ['192.0.2.10', '2001:db8::10'], 'the claims read back');
      // A re-render with the claims (what the sidecar does when it applies the same fence again)
      // keeps them dropped.
      await nft(['-f', '-'], renderFence({ ...spec, claimed: back?.claimed ?? [] }));
      t.equal(
        await seen(arpOf('192.0.2.10'), () => garp('192.0.2.10')),
        0,
        'still dropped after a re-render',
      );
      await nft(['-f', '-'], renderUnfence());
    },
  );

  t.test('fail-safe memberlist cut drops TCP and UDP on the speaker port, only that port', async (t) => {
    await nft(['-f', '-'], renderFence({ vips4: [], vips6: [], interfaces: [], memberlistPorts: [7946] }));
    const udp = (port: number) =>
      ns.run([
        'python3',
        '-c',
        `import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);\ntry: s.sendto(b"x",("192.0.2.2",${port}))\nexcept PermissionError: pass`,
      ]);
    // 192.0.2.2 is on-link via eth0; resolve it to a static neighbour so the datagram leaves at once.
    await ns.run(['ip', 'neigh', 'replace', '192.0.2.2', 'lladdr', '02:00:00:00:00:02', 'dev', 'eth0']);
    t.equal(await seen('udp port 7946', () => udp(7946)), 0);
    t.ok((await seen('udp port 7947', () => udp(7947))) >= 1);
    await nft(['-f', '-'], renderUnfence());
  });
});
