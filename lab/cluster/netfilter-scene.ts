// What azure-vnet leaves on a node after a CNI change (facts.md), laid out on a lab-cluster node
// for the netfilter tests and the demo: an arpreply and a dnat for a pod IP that the new CNI has
// since given to another pod, rules for a pod that is gone, a PERMANENT neighbour of the reused IP
// on the wrong device — next to what must stay: rules for the node's address, a wildcard-interface
// dnat, broadcast dnat, a rule whose MAC is a live pod's, ip-masq-agent's neighbour. Two real pods
// pinned to the node: `target` (an HTTP server, given the reused IP) and `client` on the same
// bridge, which cannot reach the target while the stale arpreply answers its ARP with a dead MAC.
import { waitFor } from '../../shared/clock.ts';
import type { Cluster } from './cluster.ts';
import { IDLE_ARGS } from './manifests.ts';

const OLD_MAC = '02:aa:00:00:00:13';
const GONE_MAC = '02:aa:00:00:00:12';
/** ip-masq-agent's neighbour on the bridge: PERMANENT, not a pod's, must stay. */
export const KEPT_NEIGHBOUR = { ip: '198.18.250.200', mac: '02:dd:00:00:00:c8', dev: 'cni0' };
const T = { timeoutMs: 120_000, intervalMs: 500 };

export interface NetfilterScene {
  node: string;
  namespace: string;
  /** The pod given the reused IP. */
  target: string;
  /** ebtables rule texts (as `ebtables -t nat -L` prints them) the cleanup must remove. */
  stale: string[];
  /** Rules it must keep. */
  kept: string[];
  /** From the client pod: does the target answer HTTP within 3 s? */
  reachable(): Promise<boolean>;
  /** `ebtables -t nat -L` and `ip neigh show` on the node. */
  rules(): Promise<string>;
  neighbours(): Promise<string>;
  /** Every stale rule and the stale neighbour gone. */
  cleaned(): Promise<boolean>;
}

interface Pod {
  status?: { podIP?: string };
}

function pinnedPod(name: string, namespace: string, node: string, script: string) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels: { app: name } },
    spec: {
      nodeSelector: { 'kubernetes.io/hostname': node },
      terminationGracePeriodSeconds: 1,
      containers: [
        { name: 'main', image: 'drainguard-lab:dev', imagePullPolicy: 'Never', args: ['-e', script] },
      ],
    },
  };
}

/** Creates the namespace and the two pods on `node`, then the leftovers around them. */
export async function prepareNetfilterScene(
  c: Cluster,
  node: string,
  namespace: string,
): Promise<NetfilterScene> {
  const k = (args: string[], input?: string) => c.k(args, input === undefined ? {} : { input });
  const n = c.bed.node(node);
  // Pinned pods need the node schedulable, whatever ran before.
  await k(['uncordon', node]);
  await k(['create', 'namespace', namespace]);
  const server = `process.on('SIGTERM', () => process.exit(0)); require('node:http').createServer((q, r) => r.end('ok')).listen(8080);`;
  for (const doc of [
    pinnedPod('target', namespace, node, server),
    pinnedPod('client', namespace, node, IDLE_ARGS[1] as string),
  ])
    await k(['apply', '-f', '-'], JSON.stringify(doc));
  await k(['wait', '-n', namespace, '--for=condition=Ready', 'pod/target', 'pod/client', '--timeout=120s']);
  const ip = async (name: string) =>
    (JSON.parse(await k(['get', 'pod', '-n', namespace, name, '-o', 'json'])) as Pod).status?.podIP ?? '';
  const target = await ip('target');
  const clientIp = await ip('client');
  /** Runs a fetch in the client pod; its exit code (0: an ok HTTP answer, 1: no answer). */
  const clientFetch = async (url: string) => {
    const script = `fetch('${url}', { signal: AbortSignal.timeout(3000) }).then((r) => process.exit(r.ok ? 0 : 2), () => process.exit(1))`;
    return (await c.kubectl(['exec', '-n', namespace, 'client', '--', 'node', '-e', script])).code;
  };
  // The client talks to its gateway (not to the target: it must not cache the target's MAC
  // before the stale arpreply is in place), so the node learns the client's MAC: a live one.
  const gw = (
    JSON.parse(await n.run(['ip', '-j', '-4', 'addr', 'show', 'cni0'])) as {
      addr_info: { local: string }[];
    }[]
  )[0]!.addr_info[0]!.local;
  // (A closed port: refused, but the node answered the client's ARP. fetch refuses ports 1, 9.)
  await clientFetch(`http://${gw}:40000`);
  const clientMac = await waitFor(
    'the node has the client as a neighbour',
    async () =>
      (JSON.parse(await n.run(['ip', '-j', 'neigh', 'show', clientIp])) as { lladdr?: string }[])[0]?.lladdr,
    T,
  );
  const gone = target.replace(/\.\d+$/, '.250');
  const stale = [
    `-p ARP --arp-op Request --arp-ip-dst ${target} -j arpreply --arpreply-mac ${OLD_MAC}`,
    `-p IPv4 -i eth0 --ip-dst ${target} -j dnat --to-dst ${OLD_MAC} --dnat-target ACCEPT`,
    `-p ARP --arp-op Request --arp-ip-dst ${gone} -j arpreply --arpreply-mac ${GONE_MAC}`,
    `-p IPv4 -i eth0 --ip-dst ${gone} -j dnat --to-dst ${GONE_MAC} --dnat-target ACCEPT`,
  ];
  const kept = [
    `-p ARP --arp-op Request --arp-ip-dst ${n.ipv4} -j arpreply --arpreply-mac 02:bb:00:00:00:01`,
    '-p ARP -i eth0 --arp-op Reply -j dnat --to-dst ff:ff:ff:ff:ff:ff --dnat-target ACCEPT',
    '-i az+ -j dnat --to-dst 12:34:56:78:9a:bc --dnat-target ACCEPT',
    `-p ARP --arp-op Request --arp-ip-dst ${clientIp} -j arpreply --arpreply-mac ${clientMac}`,
  ];
  // Kept ones first: an arpreply ends the chain for its match, so order matters only per IP.
  for (const r of [...kept, ...stale]) await n.run(['sh', '-c', `ebtables -t nat -A PREROUTING ${r}`]);
  await n.run(['ip', 'neigh', 'replace', target, 'lladdr', OLD_MAC, 'dev', 'eth0', 'nud', 'permanent']);
  const kn = KEPT_NEIGHBOUR;
  await n.run(['ip', 'neigh', 'replace', kn.ip, 'lladdr', kn.mac, 'dev', kn.dev, 'nud', 'permanent']);
  const rules = () => n.run(['ebtables', '-t', 'nat', '-L']);
  const neighbours = () => n.run(['ip', 'neigh', 'show']);
  return {
    node,
    namespace,
    target,
    stale,
    kept,
    reachable: async () => (await clientFetch(`http://${target}:8080`)) === 0,
    rules,
    neighbours,
    async cleaned() {
      const [r, nb] = [await rules(), await neighbours()];
      return stale.every((s) => !r.includes(s)) && !nb.includes(`${target} dev eth0`);
    },
  };
}
