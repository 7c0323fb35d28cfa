// The node's side of the handover (host.ts) on the networks users run, with `ip` answering as
// the kernel does there: kube-proxy in IPVS mode (every LoadBalancer VIP bound on kube-ipvs0, so
// `ip route get` says `local … dev lo`), and NIC names that differ between nodes (issue 22,
// defects 2 and 5).
import { readFileSync } from 'node:fs';
import t from 'tap';
import { createLogger } from '../../../../shared/log.ts';
import { NodeHost } from '../../../../sidecar/l2/host.ts';
import type { ToolRunner } from '../../../../sidecar/runner.ts';

/** A node with `ip` outputs by command line; anything else fails as a missing route would. */
function nodeWith(outputs: Record<string, unknown>) {
  const ran: string[] = [];
  const runner = {
    async run(tool: string, args: string[]) {
      const line = `${tool} ${args.join(' ')}`;
      ran.push(line);
      if (!(line in outputs)) throw new Error(`RTNETLINK answers: Network is unreachable (${line})`);
      return { stdout: JSON.stringify(outputs[line]), stderr: '', skipped: false };
    },
  } as unknown as ToolRunner;
  return { host: new NodeHost(runner, createLogger('test', 'silent')), ran };
}

const VIP = '198.51.100.100';
/** The links named, or else the routes' to `targets`; `always`'s routes and `kept` besides. */
const plan = (named: string[], targets: string[], always: string[] = [], kept: string[] = []) => ({
  named,
  targets,
  always,
  kept,
});
const FAR_VIP = '203.0.113.7';
const local = (dst: string) => [{ type: 'local', dst, dev: 'lo', prefsrc: dst, flags: [], cache: ['local'] }];
const MAIN4 = [
  { dst: 'default', gateway: '192.0.2.254', dev: 'ens5', flags: [] },
  { dst: '192.0.2.0/24', dev: 'ens5', protocol: 'kernel', scope: 'link', prefsrc: '192.0.2.10', flags: [] },
  {
    dst: '198.51.100.0/24',
    dev: 'eth0',
    protocol: 'kernel',
    scope: 'link',
    prefsrc: '198.51.100.1',
    flags: [],
  },
  { dst: '198.51.100.0/24', dev: 'eth1', metric: 100, flags: [] },
  { type: 'blackhole', dst: '198.51.100.96/28', flags: [] },
  { dst: '10.244.1.5', dev: 'cali1234', scope: 'link', flags: [] },
];
const ipvsNode = {
  [`ip -j route get ${VIP}`]: local(VIP),
  [`ip -j route get ${FAR_VIP}`]: local(FAR_VIP),
  'ip -j -4 route show table main': MAIN4,
  'ip -j route show default': [MAIN4[0]],
};

t.test('IPVS: a VIP bound on kube-ipvs0 is fenced on the link that carries its subnet', async (t) => {
  const { host, ran } = nodeWith(ipvsNode);
  t.strictSame(await host.routeDevices([VIP]), ['eth0'], 'the subnet link, not lo, not nothing');
  t.strictSame(ran, [`ip -j route get ${VIP}`, 'ip -j -4 route show table main']);
  t.strictSame(await host.routeDevices([FAR_VIP]), ['ens5'], 'outside every subnet: the default route');
  t.strictSame(await host.routeDevices([FAR_VIP, 'default']), ['ens5']);
});

t.test('IPVS: the fence links of an IPv6 VIP come from the IPv6 main table', async (t) => {
  const { host } = nodeWith({
    'ip -j route get 2001:db8:1::100': local('2001:db8:1::100'),
    'ip -j -6 route show table main': [
      { dst: '2001:db8:1::/64', dev: 'eth0', protocol: 'kernel', metric: 256, flags: [] },
      { dst: 'fe80::/64', dev: 'eth0', metric: 256, flags: [] },
      { dst: 'default', gateway: 'fe80::1', dev: 'ens5', metric: 1024, flags: [] },
    ],
  });
  t.strictSame(await host.routeDevices(['2001:db8:1::100']), ['eth0']);
});

t.test("IPVS: addresses on kube-ipvs0 and the VIPs known here are never the node's own", async (t) => {
  const { host } = nodeWith({
    'ip -j addr show': [
      { ifname: 'lo', addr_info: [{ family: 'inet', local: '127.0.0.1' }] },
      {
        ifname: 'eth0',
        addr_info: [
          { family: 'inet', local: '198.51.100.1', prefixlen: 24 },
          // a VIP bound on the link itself (kube-vip style, or a speaker's leftover)
          { family: 'inet', local: '198.51.100.105', prefixlen: 32 },
        ],
      },
      {
        ifname: 'kube-ipvs0',
        addr_info: [
          { family: 'inet', local: VIP, prefixlen: 32 },
          { family: 'inet', local: '10.96.0.1', prefixlen: 32 },
        ],
      },
      { ifname: 'kube-dummy-if', addr_info: [{ family: 'inet', local: '10.96.0.10', prefixlen: 32 }] },
    ],
  });
  t.strictSame(await host.ownAddresses([VIP, '198.51.100.105']), ['127.0.0.1', '198.51.100.1']);
});

t.test('missing interfaces: the fence goes on the named links that exist here', async (t) => {
  const { host, ran } = nodeWith({
    'ip -j link show': [{ ifname: 'lo' }, { ifname: 'eth0' }, { ifname: 'bond0' }],
    ...ipvsNode,
  });
  t.strictSame(await host.fenceLinks(plan(['eth0', 'ens9'], [VIP])), {
    interfaces: ['eth0'],
    missing: ['ens9'],
  });
  t.strictSame(await host.fenceLinks(plan(['bond0'], [VIP])), { interfaces: ['bond0'], missing: [] });
  t.strictSame(
    await host.fenceLinks(plan(['ens9', 'ens10'], [VIP])),
    { interfaces: ['eth0'], missing: ['ens9', 'ens10'] },
    "none of them here: the VIP route's link",
  );
  t.strictSame(await host.fenceLinks(plan([], [VIP])), { interfaces: ['eth0'], missing: [] }, 'none named');
  t.equal(ran.filter((c) => c === 'ip -j link show').length, 1, 'the links read once per handover');
  host.forgetRoutes();
  await host.fenceLinks(plan(['eth0'], [VIP]));
  t.equal(ran.filter((c) => c === 'ip -j link show').length, 2, 'read again after forgetRoutes');
});

t.test('missing interfaces: links that cannot be read leave the named ones as they are', async (t) => {
  const { host } = nodeWith({});
  t.strictSame(await host.fenceLinks(plan(['eth0', 'ens9'], [VIP])), {
    interfaces: ['eth0', 'ens9'],
    missing: [],
  });
});

t.test(
  'an interface that vanishes after the fence was installed: the read-back notices it and reports it missing, not fenced',
  async (t) => {
    const table = { table: { family: 'netdev', name: 'drainguard' } };
    const chain = (dev: string) => ({
      chain: { family: 'netdev', table: 'drainguard', name: `egress-${dev}`, hook: 'egress' },
    });
    const node: Record<string, unknown> = {
      'ip -j link show': [{ ifname: 'lo' }, { ifname: 'eth0' }, { ifname: 'ens9' }],
      'nft -j list tables': { nftables: [table] },
      'nft -j list table netdev drainguard': { nftables: [table, chain('eth0'), chain('ens9')] },
      [`ip -j route get ${VIP}`]: [{ dst: VIP, dev: 'ens9', flags: [], cache: [] }],
    };
    const { host } = nodeWith(node);
    t.strictSame(await host.fenceLinks(plan(['eth0', 'ens9'], [VIP])), {
      interfaces: ['eth0', 'ens9'],
      missing: [],
    });
    t.strictSame(await host.fenceLinks(plan([], [VIP])), { interfaces: ['ens9'], missing: [] });
    t.strictSame((await host.readFence())?.interfaces, ['ens9', 'eth0']);
    // ens9 is unplugged (a hot-unplugged NIC, a deleted VLAN); on Linux ≥ 6.16 its chain stays and drops nothing.
    node['ip -j link show'] = [{ ifname: 'lo' }, { ifname: 'eth0' }];
    node[`ip -j route get ${VIP}`] = [{ dst: VIP, dev: 'eth0', flags: [], cache: [] }];
    await host.readFence();
    t.strictSame(
      await host.fenceLinks(plan(['eth0', 'ens9'], [VIP])),
      { interfaces: ['eth0'], missing: ['ens9'] },
      'named: reported missing after the read-back',
    );
    t.strictSame(
      await host.fenceLinks(plan([], [VIP])),
      { interfaces: ['eth0'], missing: ['ens9'] },
      "not named (the VIP's route): the vanished link is reported missing, the route resolved again",
    );
    // It comes back: no longer missing after the next read-back.
    node['ip -j link show'] = [{ ifname: 'lo' }, { ifname: 'eth0' }, { ifname: 'ens9' }];
    await host.readFence();
    t.strictSame(await host.fenceLinks(plan(['eth0', 'ens9'], [VIP])), {
      interfaces: ['eth0', 'ens9'],
      missing: [],
    });
  },
);

t.test(
  'applying a fence with held VIPs keeps what the kernel saw claimed: the claimed sets stay in place, the new fence never answers a claimed VIP again',
  async (t) => {
    const read = (name: string) =>
      readFileSync(new URL(`../../../golden/l2/${name}`, import.meta.url), 'utf8');
    // nft as it answers with the fence of fence-held.nft installed and two claims seen (real nft 1.0.6).
    const outputs: Record<string, string> = {
      'nft -j list tables': read('list-tables.json'),
      'nft -j list table netdev drainguard': read('list-netdev-held.json'),
      'nft -j list table inet drainguard': read('list-inet-held.json'),
      'ip -j link show': JSON.stringify([
        { ifname: 'eth0', address: '02:00:00:00:00:0A' },
        { ifname: 'eth1', address: '02:00:00:00:00:0b' },
      ]),
    };
    const inputs: string[] = [];
    const runner = {
      async run(tool: string, args: string[], opts: { input?: string } = {}) {
        const line = `${tool} ${args.join(' ')}`;
        if (line === 'nft -f -') {
          inputs.push(opts.input ?? '');
          return { stdout: '', stderr: '', skipped: false };
        }
        if (!(line in outputs)) throw new Error(`unexpected: ${line}`);
        return { stdout: outputs[line], stderr: '', skipped: false };
      },
    } as unknown as ToolRunner;
    const host = new NodeHost(runner, createLogger('test', 'silent'));
    const spec = {
      vips4: [],
      vips6: [],
      interfaces: ['eth0'],
      memberlistPorts: [7946, 7947],
      pools: ['192.0.2.100-192.0.2.120', '2001:db8::100-2001:db8::1ff'],
      held: ['192.0.2.10', '192.0.2.11', '2001:db8::10'],
    };
    await host.applyFence(spec);
    t.match(inputs[0], /set claimed4 \{ type ipv4_addr; flags dynamic; elements = \{ 192\.0\.2\.10 \}; \}/);
    t.match(
      inputs[0],
      /set claimed6 \{ typeof @th,64,128; flags dynamic; elements = \{ 0x20010db8000000000000000000000010 \}; \}/,
    );
    t.match(
      inputs[0],
      /set ownmacs \{ type ether_addr; elements = \{ 02:00:00:00:00:0a \} \}/,
      "the fenced link's own MAC: its reflected frames claim nothing",
    );
    t.match(inputs[0], /ether saddr != @ownmacs arp saddr ip @held4 add @claimed4/);
    // The claimed sets are kept, never deleted: a claim the kernel adds after the read survives.
    t.equal(
      inputs[0]?.split('\n').slice(0, 20).join('\n'),
      [
        'table netdev drainguard {}',
        'flush table netdev drainguard',
        'delete chain netdev drainguard claims-eth0',
        'delete chain netdev drainguard egress-eth0',
        'delete set netdev drainguard held4',
        'delete set netdev drainguard vip4',
        'delete set netdev drainguard pool4',
        'table inet drainguard {}',
        'flush table inet drainguard',
        'delete chain inet drainguard claims',
        'delete chain inet drainguard output',
        'delete chain inet drainguard memberlist',
        'delete set inet drainguard held6',
        'delete set inet drainguard pool6',
        'delete set inet drainguard memberlist',
        'table netdev drainguard {',
        '  set held4 { type ipv4_addr; elements = { 192.0.2.10, 192.0.2.11 } }',
        '  set claimed4 { type ipv4_addr; flags dynamic; elements = { 192.0.2.10 }; }',
        '  set ownmacs { type ether_addr; elements = { 02:00:00:00:00:0a } }',
        '  set pool4 { type ipv4_addr; flags interval; elements = { 192.0.2.100-192.0.2.120 } }',
      ].join('\n'),
    );
    // Nothing held: nothing read first, the tables replaced whole.
    await host.applyFence({ ...spec, held: [], vips4: ['192.0.2.10'] });
    t.notMatch(inputs[1], /claimed/);
    t.match(inputs[1], /^table netdev drainguard \{\}\ndelete table netdev drainguard\n/);
  },
);

t.test(
  'links named and links fenced in any case: the VIPs announced on every interface, the fail-safe pools and default route, the installed fence (issue 42, item 2)',
  async (t) => {
    const { host } = nodeWith({
      'ip -j link show': [{ ifname: 'lo' }, { ifname: 'eth0' }, { ifname: 'eth1' }, { ifname: 'ens5' }],
      ...ipvsNode,
    });
    // Before: a named link that exists was the whole answer, whatever else was passed.
    t.strictSame(await host.fenceLinks(plan(['eth1'], [VIP], [VIP, 'default'])), {
      interfaces: ['eth1', 'eth0', 'ens5'],
      missing: [],
    });
    t.strictSame(await host.fenceLinks(plan(['eth1'], [VIP])), { interfaces: ['eth1'], missing: [] });
    t.strictSame(await host.fenceLinks(plan(['ens9'], [VIP], ['default'])), {
      interfaces: ['eth0', 'ens5'],
      missing: ['ens9'],
    });
    t.strictSame(await host.fenceLinks(plan([], [], [], ['eth1'])), { interfaces: ['eth1'], missing: [] });
  },
);
