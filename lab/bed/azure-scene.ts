// A scene: the azure-vnet bridge-mode layout of facts.md, rebuilt in real namespaces after a switch to
// another CNI: a node with bridge azure0 (uplink eth0 enslaved), a client on the other end of
// eth0, and one routed "new CNI" pod namespace whose IP azure-vnet once gave to another pod.
import type { KubeClient } from '../../shared/kube/client.ts';
import type { KubeObject } from '../../shared/kube/types.ts';
import type { PodInfo } from '../../sidecar/netfilter/decide.ts';
import { type Netns as BareNetns, createNamespace, sh } from './netns.ts';

type Netns = BareNetns & { destroy(): Promise<void> };

export const NODE_IP = '192.0.2.10';
export const NODE_IP6 = '2001:db8::10';
export const CLIENT_IP = '192.0.2.20';
export const CLIENT_IP6 = '2001:db8::20';
export const TUNNEL_MAC = '12:34:56:78:9a:bc';

/** IPs: .11 live azure pod (known MAC), .12 gone pod, .13 reused by a new-CNI pod, .14/.15/.16 tunnel MAC. */
export const IP = {
  liveAzure: '198.51.100.11',
  gone: '198.51.100.12',
  reused: '198.51.100.13',
  tunnelLive: '198.51.100.14',
  tunnelGone: '198.51.100.15',
  tunnelKnown: '198.51.100.16',
  masq: '198.51.100.200',
  failed: '198.51.100.17',
  incomplete: '198.51.100.18',
};
export const IP6 = { gone: '2001:db8:1::12', reused: '2001:db8:1::13' };
export const OLD_MAC = { gone: '02:aa:00:00:00:12', reused: '02:aa:00:00:00:13' };

// azure-vnet's per-pod nat PREROUTING rules, as ebtables-nft lists them.
export const arpreply = (ip: string, mac: string) =>
  `-p ARP --arp-op Request --arp-ip-dst ${ip} -j arpreply --arpreply-mac ${mac}`;
export const dnat4 = (ip: string, mac: string) =>
  `-p IPv4 -i eth0 --ip-dst ${ip} -j dnat --to-dst ${mac} --dnat-target ACCEPT`;
export const dnat6 = (ip: string, mac: string) =>
  `-p IPv6 -i eth0 --ip6-dst ${ip} -j dnat --to-dst ${mac} --dnat-target ACCEPT`;

export interface AzureScene {
  node: Netns;
  client: Netns;
  pod: Netns;
  eth0Mac: string;
  liveMac: string;
  /** nat PREROUTING specs (as ebtables-nft lists them) that must be gone after cleanup. */
  staleSpecs: string[];
  /** nat specs (any chain) that must stay. */
  keptSpecs: { chain: string; spec: string }[];
  /** Neighbours (ip|dev) that must go / stay. */
  staleNeighbours: string[];
  keptNeighbours: string[];
  pods: PodInfo[];
  /** Re-adds the per-pod rules azure-vnet would restore from /var/run/azure-vnet.json. */
  reinstall(): Promise<void>;
  destroy(): Promise<void>;
}

/** The MAC address of `dev` in `ns`. */
export async function linkMac(ns: BareNetns, dev: string): Promise<string> {
  return (JSON.parse(await ns.run(['ip', '-j', 'link', 'show', dev])) as { address: string }[])[0]!.address;
}

/** A veth pair: `a.name` in namespace `a.ns`, its peer `b.name` in `b.ns`. */
export async function veth(a: { name: string; ns: string }, b: { name: string; ns: string }): Promise<void> {
  const cmd = [
    'ip',
    'link',
    'add',
    a.name,
    'netns',
    a.ns,
    'type',
    'veth',
    'peer',
    'name',
    b.name,
    'netns',
    b.ns,
  ];
  const r = await sh(cmd);
  if (r.code !== 0) throw new Error(`${cmd.join(' ')}: ${r.stderr.trim()}`);
}

export async function buildAzureScene(): Promise<AzureScene> {
  const node = await createNamespace('node');
  const client = await createNamespace('client');
  const pod = await createNamespace('pod');
  const n = (cmd: string) => node.run(cmd.split(' '));
  // Uplink: client <-> node eth0, eth0 enslaved to azure0 (bridge mode).
  await veth({ name: 'dgc0', ns: client.ns }, { name: 'eth0', ns: node.ns });
  await n('ip link add azure0 type bridge');
  await n('ip link set azure0 type bridge stp_state 0 forward_delay 0');
  await n('ip link set eth0 master azure0');
  await n('sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0');
  await n('sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1');
  await n('ip link set eth0 up');
  await n('ip link set azure0 up');
  await n(`ip addr add ${NODE_IP}/24 dev azure0`);
  await n(`ip addr add ${NODE_IP6}/64 dev azure0 nodad`);
  // Pod subnet routed over azure0 (azure-vnet's pods sat on the bridge).
  await n('ip route add 198.51.100.0/24 dev azure0');
  await n('ip -6 route add 2001:db8:1::/64 dev azure0');

  await client.run(['sysctl', '-qw', 'net.ipv6.conf.all.accept_dad=0', 'net.ipv6.conf.default.accept_dad=0']);
  // The client plays the Azure gateway of tunnel mode: its MAC is the shared tunnel MAC, so the
  // node's bridge learns that MAC on its uplink eth0 (which must not make tunnel rules "known").
  await client.run(['ip', 'link', 'set', 'dgc0', 'address', TUNNEL_MAC]);
  await client.run(['ip', 'addr', 'add', `${CLIENT_IP}/24`, 'dev', 'dgc0']);
  await client.run(['ip', 'addr', 'add', `${CLIENT_IP6}/64`, 'dev', 'dgc0', 'nodad']);
  await client.run(['ip', 'link', 'set', 'dgc0', 'up']);
  await client.run(['ip', 'route', 'add', '198.51.100.0/24', 'via', NODE_IP]);
  await client.run(['ip', '-6', 'route', 'add', '2001:db8:1::/64', 'via', NODE_IP6]);

  // The new CNI's pod with the reused IP: routed through lxc13 (Cilium style), not bridged.
  await veth({ name: 'lxc13', ns: node.ns }, { name: 'eth0', ns: pod.ns });
  await n('sysctl -qw net.ipv4.conf.lxc13.proxy_arp=1');
  await n('ip link set lxc13 up');
  await n('ip addr add fe80::1/64 dev lxc13 nodad');
  await n(`ip route add ${IP.reused}/32 dev lxc13`);
  await n(`ip -6 route add ${IP6.reused}/128 dev lxc13`);
  await n(`ip route add ${IP.tunnelLive}/32 dev lxc13`);
  await pod.run(['sysctl', '-qw', 'net.ipv6.conf.all.accept_dad=0', 'net.ipv6.conf.default.accept_dad=0']);
  await pod.run(['ip', 'addr', 'add', `${IP.reused}/32`, 'dev', 'eth0']);
  await pod.run(['ip', 'addr', 'add', `${IP6.reused}/128`, 'dev', 'eth0', 'nodad']);
  await pod.run(['ip', 'link', 'set', 'eth0', 'up']);
  await pod.run(['ip', 'route', 'add', 'default', 'dev', 'eth0']);
  await pod.run(['ip', '-6', 'route', 'add', 'default', 'via', 'fe80::1', 'dev', 'eth0']);

  // A live azure-vnet pod still on the bridge: its MAC is its neighbour on the route device.
  const liveMac = '02:bb:00:00:00:11';
  const eth0Mac = await linkMac(node, 'eth0');

  const perNode: { chain: string; spec: string }[] = [
    // Same shapes as pod rules, but for the node's own IPs: protected.
    { chain: 'PREROUTING', spec: arpreply(NODE_IP, eth0Mac) },
    { chain: 'PREROUTING', spec: dnat6(NODE_IP6, eth0Mac) },
    {
      chain: 'PREROUTING',
      spec: '-p ARP -i eth0 --arp-op Reply -j dnat --to-dst ff:ff:ff:ff:ff:ff --dnat-target ACCEPT',
    },
    { chain: 'PREROUTING', spec: `-i az+ -j dnat --to-dst ${TUNNEL_MAC} --dnat-target ACCEPT` },
    { chain: 'PREROUTING', spec: '-p 802_1Q -j DROP' },
    {
      chain: 'POSTROUTING',
      spec: `-s Unicast -o eth0 -j snat --to-src ${eth0Mac} --snat-arp --snat-target ACCEPT`,
    },
  ];
  const live = [
    arpreply(IP.liveAzure, liveMac),
    dnat4(IP.liveAzure, liveMac),
    arpreply(IP.tunnelKnown, TUNNEL_MAC),
    dnat4(IP.tunnelKnown, TUNNEL_MAC),
  ];
  const stale = [
    arpreply(IP.gone, OLD_MAC.gone),
    dnat4(IP.gone, OLD_MAC.gone),
    dnat6(IP6.gone, OLD_MAC.gone),
    arpreply(IP.reused, OLD_MAC.reused),
    dnat4(IP.reused, OLD_MAC.reused),
    dnat6(IP6.reused, OLD_MAC.reused),
    arpreply(IP.tunnelLive, TUNNEL_MAC),
    dnat4(IP.tunnelLive, TUNNEL_MAC),
    arpreply(IP.tunnelGone, TUNNEL_MAC),
    dnat4(IP.tunnelGone, TUNNEL_MAC),
  ];
  const restore = [
    '*nat',
    ...[...perNode.filter((r) => r.chain === 'PREROUTING').map((r) => r.spec), ...live, ...stale].map(
      (s) => `-A PREROUTING ${s}`,
    ),
    ...perNode.filter((r) => r.chain === 'POSTROUTING').map((r) => `-A POSTROUTING ${r.spec}`),
    'COMMIT',
    '',
  ].join('\n');
  await node.run(['ebtables-restore', '--noflush'], { input: restore });
  // Filter table rules are never read, let alone touched.
  await n('ebtables -t filter -A FORWARD -p 802_1Q -j DROP');

  const neigh = (ip: string, mac: string) =>
    n(`ip neigh replace ${ip} lladdr ${mac} dev azure0 nud permanent`);
  await neigh(IP.liveAzure, liveMac);
  await neigh(IP.gone, OLD_MAC.gone); // no current pod: never touched
  await neigh(IP.reused, OLD_MAC.reused); // pod routed via lxc13: stale
  await neigh(IP6.reused, OLD_MAC.reused);
  await neigh(IP.tunnelLive, TUNNEL_MAC); // pod routed via lxc13: stale
  await neigh(IP.tunnelKnown, TUNNEL_MAC); // on its route device azure0: live, and makes .16's rules live
  await neigh(IP.masq, '02:dd:00:00:00:c8'); // ip-masq-agent's: not a pod IP
  await n(`ip neigh add ${IP.failed} dev azure0 nud failed`);
  await n(`ip neigh add ${IP.incomplete} dev azure0 nud incomplete`);
  await n(`ip route add ${IP.failed}/32 dev lxc13`);

  const pods: PodInfo[] = [
    { namespace: 'default', name: 'azure-live', ips: [IP.liveAzure] },
    { namespace: 'kube-system', name: 'lxc-health', ips: [IP.reused, IP6.reused] },
    { namespace: 'default', name: 'tunnel-live', ips: [IP.tunnelLive] },
    { namespace: 'default', name: 'tunnel-known', ips: [IP.tunnelKnown] },
    { namespace: 'default', name: 'failed-neigh', ips: [IP.failed] },
    // Route for .18 goes via azure0, where its INCOMPLETE entry is: not stale.
    { namespace: 'default', name: 'incomplete-neigh', ips: [IP.incomplete] },
    { namespace: 'kube-system', name: 'host-net', ips: [NODE_IP] },
  ];
  return {
    node,
    client,
    pod,
    eth0Mac,
    liveMac,
    staleSpecs: stale,
    keptSpecs: [...perNode, ...live.map((spec) => ({ chain: 'PREROUTING', spec }))],
    staleNeighbours: [
      `${IP.reused}|azure0`,
      `${IP6.reused}|azure0`,
      `${IP.tunnelLive}|azure0`,
      `${IP.failed}|azure0`,
    ],
    keptNeighbours: [
      `${IP.liveAzure}|azure0`,
      `${IP.gone}|azure0`,
      `${IP.tunnelKnown}|azure0`,
      `${IP.masq}|azure0`,
      `${IP.incomplete}|azure0`,
    ],
    pods,
    async reinstall() {
      await node.run(['ebtables-restore', '--noflush'], {
        input: `*nat\n${stale.map((s) => `-A PREROUTING ${s}`).join('\n')}\nCOMMIT\n`,
      });
    },
    async destroy() {
      await pod.destroy();
      await client.destroy();
      await node.destroy();
    },
  };
}

/** The scene's node in the API: a namespace for its pods and a Node whose InternalIP is NODE_IP. */
export async function registerAzureNode(
  client: KubeClient,
  nodeName: string,
  namespace: string,
): Promise<void> {
  await client.create('/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: namespace },
  });
  await client.create('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: nodeName } });
  const node = await client.get<KubeObject>(`/api/v1/nodes/${nodeName}`);
  await client.replace(`/api/v1/nodes/${nodeName}/status`, {
    ...node,
    status: { addresses: [{ type: 'InternalIP', address: NODE_IP }] },
  });
}
