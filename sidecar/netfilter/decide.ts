// The staleness decision: plain data in, verdicts out. No I/O, no clock.
import { isIP } from 'node:net';
import { canonicalIp, type EbRule, formatMac, isGroupMac, ruleKey } from './ebtables.ts';
import { type FdbEntry, type Iface, type Neighbour, type Route, routeDevice } from './hoststate.ts';

export interface PodInfo {
  namespace: string;
  name: string;
  ips: string[];
}

/** Everything one pass reads from the host. */
export interface Snapshot {
  /** nat table rules; undefined when ebtables could not be used (the rule half of the pass is skipped). */
  rules?: EbRule[];
  neighbours: Neighbour[];
  ifaces: Iface[];
  routes: Route[];
  fdb: FdbEntry[];
}

export interface DecideInput {
  snapshot: Snapshot;
  pods: readonly PodInfo[];
  /** Node object addresses (InternalIP/ExternalIP); local interface addresses are added here. */
  nodeAddresses: readonly string[];
}

export interface StaleRule {
  key: string;
  rule: EbRule;
  reason: string;
}

export interface StaleNeighbour {
  key: string;
  neighbour: Neighbour;
  reason: string;
}

export type Verdict = 'stale' | 'live' | 'protected';

export interface Decision {
  staleRules: StaleRule[];
  staleNeighbours: StaleNeighbour[];
  /** Per rule, why it is kept or removed (for --dry-run output, logs and tests). */
  verdicts: { rule: EbRule; verdict: Verdict; reason: string }[];
}

const neighbourKey = (n: Pick<Neighbour, 'ip' | 'dev'>) => `${n.ip}|${n.dev}`;
const BAD_NEIGHBOUR_STATES = ['PERMANENT', 'FAILED', 'INCOMPLETE'];
/** Bridge ports that lead to local endpoints (pods, VMs), as opposed to uplinks. */
const LOCAL_PORT_KINDS = new Set(['veth', 'tap', 'tun']);

/**
 * A per-pod ebtables rule is stale when its IP is not a node address and its MAC is not
 * known here; known = a local interface's MAC, a MAC learned in a bridge FDB on a local
 * port (a veth/tap port that no nat rule names as its -i/-o), or (for an IP of a current
 * pod) the lladdr of the pod IP's neighbour on its route device. The
 * neighbour criterion is per IP, so a tunnel-mode MAC shared by all pods is judged per IP.
 * A neighbour is stale only for an IP of a current pod on this node, when it is
 * PERMANENT/FAILED/INCOMPLETE on a device other than that IP's route device.
 * Everything that is not an exact per-pod shape (see classify) is protected.
 */
export function decide(input: DecideInput): Decision {
  const { snapshot } = input;
  const nodeIps = new Set<string>();
  for (const a of input.nodeAddresses) if (isIP(a)) nodeIps.add(canonicalIp(a));
  for (const i of snapshot.ifaces) for (const ip of i.ips) nodeIps.add(ip);

  const globalMacs = new Map<string, string>();
  for (const i of snapshot.ifaces)
    if (i.mac && !isGroupMac(i.mac) && i.mac !== '000000000000') globalMacs.set(i.mac, `interface ${i.name}`);
  // Only ports towards local endpoints count: a MAC learned on the uplink is somebody else's
  // (in tunnel mode the gateway's 12:34:56:78:9a:bc is learned there, and would otherwise make
  // every tunnel-mode rule look live). Uplinks: ports named by the nat rules themselves
  // (azure-vnet's -i eth0 / -o eth0) and anything that is not a veth/tap.
  const ruleIfaces = new Set<string>();
  for (const r of snapshot.rules ?? [])
    for (let k = 0; k < r.tokens.length - 1; k++)
      if (r.tokens[k] === '-i' || r.tokens[k] === '-o') ruleIfaces.add(r.tokens[k + 1]!);
  const kindOf = new Map(snapshot.ifaces.map((i) => [i.name, i.kind]));
  const isLocalPort = (dev: string) => !ruleIfaces.has(dev) && LOCAL_PORT_KINDS.has(kindOf.get(dev) ?? '');
  for (const f of snapshot.fdb)
    if (f.master && !isGroupMac(f.mac) && !globalMacs.has(f.mac) && isLocalPort(f.dev))
      globalMacs.set(f.mac, `bridge FDB on ${f.dev} (${f.master})`);

  const podByIp = new Map<string, PodInfo>();
  for (const p of input.pods) for (const ip of p.ips) if (isIP(ip)) podByIp.set(canonicalIp(ip), p);

  const routeDevCache = new Map<string, string | undefined>();
  const devFor = (ip: string) => {
    if (!routeDevCache.has(ip)) routeDevCache.set(ip, routeDevice(snapshot.routes, ip));
    return routeDevCache.get(ip);
  };
  const neighByIp = new Map<string, Neighbour[]>();
  for (const n of snapshot.neighbours) {
    const list = neighByIp.get(n.ip);
    if (list) list.push(n);
    else neighByIp.set(n.ip, [n]);
  }

  const verdicts: Decision['verdicts'] = [];
  const staleRules: StaleRule[] = [];
  for (const rule of snapshot.rules ?? []) {
    const p = rule.perPod;
    if (!p) {
      verdicts.push({ rule, verdict: 'protected', reason: 'not a per-pod arpreply/dnat rule' });
      continue;
    }
    if (nodeIps.has(p.ip)) {
      verdicts.push({ rule, verdict: 'protected', reason: `${p.ip} is a node address` });
      continue;
    }
    const known = globalMacs.get(p.mac);
    if (known) {
      verdicts.push({ rule, verdict: 'live', reason: `MAC ${formatMac(p.mac)} is known here (${known})` });
      continue;
    }
    const pod = podByIp.get(p.ip);
    // The neighbour criterion is about a pod's own entry: azure-vnet also left PERMANENT
    // neighbours for pods that are gone, on the very device their route uses.
    const dev = pod ? devFor(p.ip) : undefined;
    const onRoute = dev ? neighByIp.get(p.ip)?.find((n) => n.dev === dev && n.mac === p.mac) : undefined;
    if (onRoute) {
      verdicts.push({
        rule,
        verdict: 'live',
        reason: `MAC ${formatMac(p.mac)} is the neighbour of ${p.ip} on its route device ${dev}`,
      });
      continue;
    }
    const owner = pod ? `pod ${pod.namespace}/${pod.name}` : 'no current pod on this node';
    const reason = `${p.kind} for ${p.ip} (${owner}) points at MAC ${formatMac(p.mac)}, not known here`;
    verdicts.push({ rule, verdict: 'stale', reason });
    staleRules.push({ key: ruleKey(rule), rule, reason });
  }

  const staleNeighbours: StaleNeighbour[] = [];
  for (const [ip, pod] of podByIp) {
    if (nodeIps.has(ip)) continue;
    const dev = devFor(ip);
    // Without a route we cannot tell the pod's device: leave its neighbours alone.
    if (!dev) continue;
    for (const n of neighByIp.get(ip) ?? []) {
      if (n.dev === dev) continue;
      const bad = n.states.find((s) => BAD_NEIGHBOUR_STATES.includes(s));
      if (!bad) continue;
      staleNeighbours.push({
        key: neighbourKey(n),
        neighbour: n,
        reason: `${bad} neighbour for ${ip} (pod ${pod.namespace}/${pod.name}) on ${n.dev}, but its route is via ${dev}`,
      });
    }
  }
  return { staleRules, staleNeighbours, verdicts };
}
