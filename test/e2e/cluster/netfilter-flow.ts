// Stale netfilter state on a real node, cleaned by the standalone DaemonSet as a user applies it.
// node-b is given what azure-vnet leaves behind after a CNI change (facts.md): an arpreply and a
// dnat for a pod IP that the new CNI has since given to another pod, rules for a pod that is
// gone, a PERMANENT neighbour of the reused IP on the wrong device — next to what must stay:
// rules for the node's address, a wildcard-interface dnat, broadcast dnat, a rule whose MAC is
// a live pod's, ip-masq-agent's neighbour. A real client pod on the same bridge cannot reach
// the real pod with the reused IP (the stale arpreply answers its ARP with a dead MAC) until
// the cleanup has run.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import type { Cluster } from '../../../lab/cluster/cluster.ts';
import { installNetfilterCleanup } from '../../../lab/cluster/install.ts';
import { IDLE_ARGS } from '../../../lab/cluster/manifests.ts';
import { waitFor } from '../../../shared/clock.ts';
import { withLogs } from './logs.ts';
import { cluster } from './shared.ts';

const NODE = 'node-b';
const NS = 'nf-flow';
const OLD_MAC = '02:aa:00:00:00:13';
const GONE_MAC = '02:aa:00:00:00:12';
const T = { timeoutMs: 120_000, intervalMs: 500 };

interface Pod {
  metadata: { name: string };
  status?: { podIP?: string };
}

let c: Cluster;
const k = (args: string[], input?: string) => c.k(args, input === undefined ? {} : { input });
const node = () => c.bed.node(NODE);
const nat = async () => node().run(['ebtables', '-t', 'nat', '-L']);
const neighbours = async () => node().run(['ip', 'neigh', 'show']);

/** Runs a fetch in the client pod; its exit code (0: an ok HTTP answer, 1: no answer). */
async function clientFetch(url: string): Promise<number> {
  const script = `fetch('${url}', { signal: AbortSignal.timeout(3000) }).then((r) => process.exit(r.ok ? 0 : 2), () => process.exit(1))`;
  return (await c.kubectl(['exec', '-n', NS, 'client', '--', 'node', '-e', script])).code;
}

/** From the client pod: can it fetch the target over the bridge within 3 s? */
const reachable = async (ip: string) => (await clientFetch(`http://${ip}:8080`)) === 0;

function pinnedPod(name: string, script: string) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NS, labels: { app: name } },
    spec: {
      nodeSelector: { 'kubernetes.io/hostname': NODE },
      terminationGracePeriodSeconds: 1,
      containers: [
        { name: 'main', image: 'drainguard-lab:dev', imagePullPolicy: 'Never', args: ['-e', script] },
      ],
    },
  };
}

describe('netfilter cleanup on a real node (standalone DaemonSet)', { timeout: 900_000 }, () => {
  let target: string;
  let clientIp: string;
  let clientMac: string;
  let stale: string[];
  let kept: string[];

  before(async () => {
    c = await cluster();
    // Pinned pods need node-b schedulable, whatever an earlier suite left.
    await k(['uncordon', NODE]);
    await k(['create', 'namespace', NS]);
    const idle = IDLE_ARGS[1]!;
    const server = `process.on('SIGTERM', () => process.exit(0)); require('node:http').createServer((q, r) => r.end('ok')).listen(8080);`;
    for (const doc of [pinnedPod('target', server), pinnedPod('client', idle)])
      await k(['apply', '-f', '-'], JSON.stringify(doc));
    await k(['wait', '-n', NS, '--for=condition=Ready', 'pod/target', 'pod/client', '--timeout=120s']);
    const ip = async (name: string) =>
      (JSON.parse(await k(['get', 'pod', '-n', NS, name, '-o', 'json'])) as Pod).status?.podIP ?? '';
    target = await ip('target');
    clientIp = await ip('client');
    // The client talks to its gateway (not to the target: it must not cache the target's MAC
    // before the stale arpreply is in place), so the node learns the client's MAC: a live one.
    const gw = (
      JSON.parse(await node().run(['ip', '-j', '-4', 'addr', 'show', 'cni0'])) as {
        addr_info: { local: string }[];
      }[]
    )[0]!.addr_info[0]!.local;
    // (A closed port: refused, but the node answered the client's ARP. fetch refuses ports 1, 9.)
    await clientFetch(`http://${gw}:40000`);
    clientMac = await waitFor(
      'the node has the client as a neighbour',
      async () =>
        (JSON.parse(await node().run(['ip', '-j', 'neigh', 'show', clientIp])) as { lladdr?: string }[])[0]
          ?.lladdr,
      T,
    );
    const nodeIp = node().ipv4;
    const gone = target.replace(/\.\d+$/, '.250');
    stale = [
      `-p ARP --arp-op Request --arp-ip-dst ${target} -j arpreply --arpreply-mac ${OLD_MAC}`,
      `-p IPv4 -i eth0 --ip-dst ${target} -j dnat --to-dst ${OLD_MAC} --dnat-target ACCEPT`,
      `-p ARP --arp-op Request --arp-ip-dst ${gone} -j arpreply --arpreply-mac ${GONE_MAC}`,
      `-p IPv4 -i eth0 --ip-dst ${gone} -j dnat --to-dst ${GONE_MAC} --dnat-target ACCEPT`,
    ];
    kept = [
      `-p ARP --arp-op Request --arp-ip-dst ${nodeIp} -j arpreply --arpreply-mac 02:bb:00:00:00:01`,
      '-p ARP -i eth0 --arp-op Reply -j dnat --to-dst ff:ff:ff:ff:ff:ff --dnat-target ACCEPT',
      '-i az+ -j dnat --to-dst 12:34:56:78:9a:bc --dnat-target ACCEPT',
      `-p ARP --arp-op Request --arp-ip-dst ${clientIp} -j arpreply --arpreply-mac ${clientMac}`,
    ];
    // Kept ones first: an arpreply ends the chain for its match, so order matters only per IP.
    for (const r of [...kept, ...stale]) await node().run(['sh', '-c', `ebtables -t nat -A PREROUTING ${r}`]);
    await node().run([
      'ip',
      'neigh',
      'replace',
      target,
      'lladdr',
      OLD_MAC,
      'dev',
      'eth0',
      'nud',
      'permanent',
    ]);
    await node().run([
      'ip',
      'neigh',
      'replace',
      '198.18.250.200',
      'lladdr',
      '02:dd:00:00:00:c8',
      'dev',
      'cni0',
      'nud',
      'permanent',
    ]);
  });

  test('the reused IP is unreachable, then reachable once the DaemonSet has cleaned: nothing live or protected deleted', () =>
    withLogs(c, async () => {
      // The client asks for the target's MAC for the first time and gets the dead one.
      assert.equal(await reachable(target), false, 'the stale arpreply hides the pod with the reused IP');
      await installNetfilterCleanup(c);
      await waitFor(
        'stale rules and the stale neighbour removed on node-b',
        async () => {
          const [rules, neigh] = [await nat(), await neighbours()];
          return stale.every((s) => !rules.includes(s)) && !neigh.includes(`${target} dev eth0`);
        },
        T,
      );
      const rules = await nat();
      for (const s of kept) assert.ok(rules.includes(s), `kept: ${s}\n${rules}`);
      assert.match(await neighbours(), /198\.18\.250\.200 dev cni0 lladdr 02:dd:00:00:00:c8 PERMANENT/);
      await waitFor('the client reaches the pod with the reused IP', () => reachable(target), T);
      const events = await k([
        'get',
        'events',
        '-n',
        'default',
        '--field-selector',
        `involvedObject.name=${NODE}`,
        '-o',
        'json',
      ]);
      const msgs = (JSON.parse(events) as { items: { reason: string; message: string }[] }).items
        .filter((e) => e.reason === 'NetfilterCleanup')
        .map((e) => e.message);
      assert.ok(
        msgs.some((m) => /removed 4 stale ebtables rule\(s\) and 1 neighbour\(s\)/.test(m)),
        `NetfilterCleanup Event on ${NODE}: ${msgs.join(' | ')}`,
      );
      // The other nodes had nothing stale: nothing reported there.
      for (const other of ['node-a', 'node-c']) {
        const ev = await k([
          'get',
          'events',
          '-n',
          'default',
          '--field-selector',
          `involvedObject.name=${other},reason=NetfilterCleanup`,
          '-o',
          'name',
        ]);
        assert.equal(ev.trim(), '', `${other}: no cleanup`);
      }
    }));
});
