// The robustness scene's netfilter part (I/O): drainguard's netfilter-cleanup DaemonSet on every
// node, a DaemonSet of small live pods on the pod network (a drain leaves DaemonSet pods in
// place), and, before each trial, azure-vnet's per-pod ebtables rules (facts.md) for every live
// pod of that DaemonSet plus rules for a gone pod's IP on every node, so the cleanup has work to do
// while the nemesis strikes (it passes on the routers' pod events, on start, on resync). After the
// settle, a pod still live (same uid and IP) must have every rule it had before: the
// live-rule-deleted invariant.
import type { Cluster } from '../../lab/cluster/cluster.ts';
import { installNetfilterCleanup } from '../../lab/cluster/install.ts';
import { daemonSet } from '../../lab/cluster/manifests.ts';
import { LIVE_NS, type PodView, podsIn, type Scene, statuses } from '../../lab/cluster/robustness-scene.ts';
import type { PodRules } from './observations.ts';

/** A MAC no interface has: the gone pod's. */
const GONE_MAC = '02:aa:00:00:00:fa';

/** azure-vnet's per-pod nat PREROUTING rules, as `ebtables -t nat -L` prints them. */
export const perPodRules = (ip: string, mac: string): string[] => [
  `-p ARP --arp-op Request --arp-ip-dst ${ip} -j arpreply --arpreply-mac ${mac}`,
  `-p IPv4 -i eth0 --ip-dst ${ip} -j dnat --to-dst ${mac} --dnat-target ACCEPT`,
];

/** The rules of a gone pod: an address in the node's pod subnet that no pod gets (.250). */
export const goneRules = (podCIDR: string): string[] =>
  perPodRules(podCIDR.replace(/\.\d+\/\d+$/, '.250'), GONE_MAC);

/** The live pods: an HTTP server each, probed by the kubelet every 2 s (its MAC stays known). */
function liveDaemonSet(): object {
  const server = `process.on('SIGTERM', () => process.exit(0)); require('node:http').createServer((q, r) => r.end('ok')).listen(8080);`;
  return daemonSet(
    'nf-live',
    LIVE_NS,
    { app: 'nf-live' },
    {
      terminationGracePeriodSeconds: 1,
      tolerations: [{ operator: 'Exists' }],
      containers: [
        {
          name: 'main',
          image: 'drainguard-lab:dev',
          imagePullPolicy: 'Never',
          args: ['-e', server],
          readinessProbe: { httpGet: { path: '/', port: 8080 }, periodSeconds: 2 },
        },
      ],
    },
  );
}

/** The cleanup DaemonSet as a user applies it, and the live pods, rolled out. */
export async function setUpNetfilter(c: Cluster): Promise<void> {
  await installNetfilterCleanup(c);
  await c.k(['create', 'namespace', LIVE_NS]);
  await c.k(['apply', '-f', '-'], { input: JSON.stringify(liveDaemonSet()) });
  await c.k(['rollout', 'status', '-n', LIVE_NS, 'daemonset/nf-live', '--timeout=180s']);
}

export interface Planted {
  pod: string;
  uid: string;
  node: string;
  ip: string;
  rules: string[];
}

/** The live pods and every node's PREROUTING rules, read once. */
interface NetfilterView {
  pods: PodView[];
  rules: Map<string, string[]>;
}

async function readView(s: Scene): Promise<NetfilterView> {
  const rules = new Map<string, string[]>();
  for (const n of s.c.nodes) {
    const r = await s.c.bed.node(n.name).exec(['ebtables', '-t', 'nat', '-L', 'PREROUTING']);
    rules.set(n.name, r.code === 0 ? r.stdout.split('\n').map((l) => l.trim()) : []);
  }
  return { pods: await podsIn(s, LIVE_NS), rules };
}

/** The MAC the node has for a pod IP (its neighbour entry on the bridge), if any. */
async function macOf(c: Cluster, node: string, ip: string): Promise<string | undefined> {
  const r = await c.bed.node(node).exec(['ip', '-j', 'neigh', 'show', ip, 'dev', 'cni0']);
  if (r.code !== 0) return undefined;
  return (JSON.parse(r.stdout || '[]') as { lladdr?: string }[])[0]?.lladdr;
}

/** Each planted pod's rules in a view, and whether it stayed live (same uid and IP, not deleted). */
function rulesIn(view: NetfilterView, planted: Planted[]): PodRules[] {
  const now = new Map(view.pods.map((p) => [`${p.metadata.namespace}/${p.metadata.name}`, p]));
  return planted.map((p) => {
    const have = view.rules.get(p.node) ?? [];
    const q = now.get(p.pod);
    return {
      pod: p.pod,
      live: q?.metadata.uid === p.uid && q.status?.podIP === p.ip && !q.metadata.deletionTimestamp,
      before: p.rules,
      after: p.rules.filter((r) => have.includes(r)),
    };
  });
}

/**
 * Before the action: every live pod (ready, its MAC known on its node) gets its per-pod rules,
 * and every node a gone pod's rules, each added when missing. Returns the live pods' rules, and
 * what became of the previous trial's since its check (`between`: a rule lost after one trial's
 * settle and before the next would otherwise be planted again unseen).
 */
export async function plantRules(
  s: Scene,
  previous: Planted[] = [],
): Promise<{ planted: Planted[]; between: PodRules[]; goneCleaned: number }> {
  const view = await readView(s);
  const between = rulesIn(view, previous).map((r) => ({ ...r, pod: `${r.pod} (between trials)` }));
  const out: Planted[] = [];
  for (const p of view.pods) {
    const node = p.spec.nodeName;
    const ip = p.status?.podIP;
    const ready = statuses(p).every((x) => x.ready);
    if (!node || !ip || !ready || p.metadata.deletionTimestamp) continue;
    const mac = await macOf(s.c, node, ip);
    if (!mac) continue;
    out.push({
      pod: `${p.metadata.namespace}/${p.metadata.name}`,
      uid: p.metadata.uid,
      node,
      ip,
      rules: perPodRules(ip, mac),
    });
  }
  /** Nodes where the cleanup removed the gone pod's rules since they were planted. */
  let goneCleaned = 0;
  for (const n of s.c.nodes) {
    const have = view.rules.get(n.name) ?? [];
    if (goneRules(n.podCIDR).every((r) => !have.includes(r))) goneCleaned++;
    const want = [...out.filter((p) => p.node === n.name).flatMap((p) => p.rules), ...goneRules(n.podCIDR)];
    for (const r of want.filter((r) => !have.includes(r)))
      await s.c.bed.node(n.name).run(['sh', '-c', `ebtables -t nat -A PREROUTING ${r}`]);
  }
  return { planted: out, between, goneCleaned };
}

/** After the settle: each planted pod's rules, and whether it stayed live. */
export async function rulesAfter(s: Scene, planted: Planted[]): Promise<PodRules[]> {
  return rulesIn(await readView(s), planted);
}
