// The pure half of the MetalLB layer-2 speaker simulator: what each speaker decides from its own
// view, as metallb/metallb v0.14–v0.16 does it. No network, no API: plain data in, decisions out,
// so every rule is unit-tested (test/unit/sim/speaker-*.test.ts, each test named after the
// upstream function it follows).
//
// Election, per service: `ShouldAnnounce` (speaker/layer2_controller.go) with what it calls —
// `activeEndpointExists`, `epslices.EndpointCanServe`, `poolFor` (speaker/main.go),
// `l2AdsForService` (v0.16), `adsMatchNodeL2` / `poolMatchesNodeL2`, `speakersForAds` /
// `speakersForPool`, `nodesWithEndpoint`, `k8snodes.IsNetworkUnavailable` /
// `IsNodeExcludedFromBalancers`, and `selectedNodes` / `setL2AdvertisementsToPools`
// (internal/config/config.go), which build an L2Advertisement's node set from the Node objects
// that exist: a live member without a Node object is selected by no L2Advertisement, so it never
// announces (the exclusion checks alone would let it through; the node set does not). For the
// winner, the interfaces it announces on: `ipAdvertisementFor` (same file).
// The label-selector matching is this file's own (metav1.LabelSelectorAsSelector's rules), not
// drainguard's, so the simulator does not share a bug with the code it tests.
//
// Liveness: memberlist's SWIM probe/ack, reduced to direct probes. Every probe interval a speaker
// pings each peer (memberlist pings one peer per interval, round robin; all at once here keeps a
// 3-node scene's timings close to memberlist's ~5–7 s); a peer answers a ping with an ack to the
// sender; a peer is alive while an ack to one of OUR pings arrived within deadMs. A `leave`
// removes a member at once; only an ack from a newer incarnation (a restarted speaker) brings it
// back, as memberlist's incarnation numbers do.
// Not modelled: indirect probes (ping-req through k other members) and gossip of suspicion and
// death. They make a node that is unreachable only on some path survive, and spread the verdict
// faster; for a node cut off in its own output (drainguard's fail-safe drops sport and dport 7946
// on OUTPUT) neither changes the outcome: its acks and ping-reqs never leave it, so every peer
// declares it dead (indirect probes to it fail the same way), and none of its own probes or
// ping-reqs leave, so it declares every peer dead, as memberlist does.
import { createHash } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import type { KubeObject, Node } from '../../../shared/kube/types.ts';

export const EXCLUDE_LABEL = 'node.kubernetes.io/exclude-from-external-load-balancers';
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
export const HOSTNAME_LABEL = 'kubernetes.io/hostname';

// --- memberlist -----------------------------------------------------------------------------

export interface MemberView {
  /** When an ack to one of our own pings last came back from each peer. */
  lastAck: Map<string, number>;
  /** Members that sent `leave`, with the incarnation they left as. */
  left: Map<string, number>;
  /** Our pings still waiting for their ack, by sequence number. */
  pending: Map<number, { node: string; at: number }>;
  seq: number;
}

export type MemberMsg =
  | { type: 'ping'; node: string; seq: number; inc: number }
  | { type: 'ack'; node: string; seq: number; inc: number }
  | { type: 'leave'; node: string; inc: number };

export const newMemberView = (): MemberView => ({
  lastAck: new Map(),
  left: new Map(),
  pending: new Map(),
  seq: 0,
});

/** One probe round: a ping to every peer (not to self), remembered until its ack or deadMs. */
export function probeRound(
  view: MemberView,
  self: string,
  inc: number,
  peers: readonly string[],
  now: number,
  deadMs: number,
): { to: string; msg: MemberMsg }[] {
  for (const [s, p] of view.pending) if (now - p.at >= deadMs) view.pending.delete(s);
  const out: { to: string; msg: MemberMsg }[] = [];
  for (const node of peers) {
    if (node === self) continue;
    const seq = ++view.seq;
    view.pending.set(seq, { node, at: now });
    out.push({ to: node, msg: { type: 'ping', node: self, seq, inc } });
  }
  return out;
}

/**
 * A message from a peer. A ping is answered with an ack (returned: the caller sends it back to
 * the ping's source); an ack counts only if it answers one of our pings to that very node; a
 * leave removes the member until an ack from a newer incarnation.
 */
export function receive(
  view: MemberView,
  self: string,
  inc: number,
  m: MemberMsg,
  now: number,
): MemberMsg | undefined {
  if (m.node === self) return undefined;
  if (m.type === 'ping') return { type: 'ack', node: self, seq: m.seq, inc };
  if (m.type === 'leave') {
    view.left.set(m.node, Math.max(m.inc, view.left.get(m.node) ?? m.inc));
    view.lastAck.delete(m.node);
    return undefined;
  }
  const p = view.pending.get(m.seq);
  if (!p || p.node !== m.node) return undefined;
  view.pending.delete(m.seq);
  const leftAs = view.left.get(m.node);
  if (leftAs !== undefined) {
    if (m.inc <= leftAs) return undefined;
    view.left.delete(m.node);
  }
  view.lastAck.set(m.node, now);
  return undefined;
}

/** The live members: self, and every peer whose ack to one of our pings came within deadMs. */
export function liveMembers(self: string, view: MemberView, now: number, deadMs: number): Set<string> {
  const live = new Set<string>([self]);
  for (const [n, t] of view.lastAck) if (!view.left.has(n) && now - t < deadMs) live.add(n);
  return live;
}

// --- ShouldAnnounce -------------------------------------------------------------------------

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

export interface Service extends KubeObject {
  spec?: { type?: string; externalTrafficPolicy?: string };
  status?: { loadBalancer?: { ingress?: { ip?: string }[] } };
}

export interface EndpointSlice extends KubeObject {
  endpoints?: {
    nodeName?: string;
    /** discovery.k8s.io/v1beta1 */
    topology?: Record<string, string>;
    conditions?: { ready?: boolean | null; serving?: boolean | null };
  }[];
}

export interface IPAddressPool extends KubeObject {
  spec?: { addresses?: string[] };
}

export interface L2Advertisement extends KubeObject {
  spec?: {
    ipAddressPools?: string[];
    ipAddressPoolSelectors?: LabelSelector[];
    nodeSelectors?: LabelSelector[];
    /** Honoured in the election from v0.16.0 on (`l2AdsForService`). */
    serviceSelectors?: LabelSelector[];
    /** The interfaces to announce on; none listed: every interface (`ipAdvertisementFor`). */
    interfaces?: string[];
  };
}

export interface AnnounceInput {
  /** This speaker's node. */
  self: string;
  service: Service;
  /** EndpointSlices of the cluster (or of this service): the service's are picked by label and namespace. */
  endpointSlices: Iterable<EndpointSlice>;
  pools: Iterable<IPAddressPool>;
  l2Advertisements: Iterable<L2Advertisement>;
  nodes: Iterable<Node>;
  /** Live memberlist members, self included. */
  live: ReadonlySet<string>;
  /** MetalLB's --ignore-exclude-lb (v0.14.4+): the exclude label takes no node out (NetworkUnavailable still does). */
  ignoreExcludeLb?: boolean;
}

export interface AnnounceDecision {
  /** MetalLB's reason: "" = this node announces; otherwise why not (its deleteBalancer reasons). */
  reason:
    | ''
    | 'notLoadBalancer'
    | 'noIPAllocated'
    | 'invalidIP'
    | 'ipNotAllowed'
    | 'noMatchingAdvertisement'
    | 'notOwner';
  /** The service's LoadBalancer IPs, all announced together (the election hashes the first). */
  ips: string[];
  /** The ordered candidates (first wins); empty where the election never ran. */
  candidates: string[];
  /**
   * Announcing: the interfaces to announce on (`ipAdvertisementFor`), the union of those listed by
   * the service's L2Advertisements that select this node; empty when one of them lists none (every
   * interface), and where this node does not announce.
   */
  interfaces: string[];
}

/** metav1.LabelSelectorAsSelector(sel).Matches(labels): every matchLabels pair and every expression. */
export function selectorMatches(sel: LabelSelector, labels: Record<string, string> | undefined): boolean {
  const l = labels ?? {};
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (l[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.hasOwn(l, e.key);
    const vals = e.values ?? [];
    switch (e.operator) {
      case 'In':
        if (!has || !vals.includes(l[e.key] as string)) return false;
        break;
      case 'NotIn':
        if (has && vals.includes(l[e.key] as string)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        // An invalid selector: MetalLB refuses the configuration; here it selects nothing.
        return false;
    }
  }
  return true;
}

/** `config.ParseCIDR` for one `spec.addresses` entry (CIDR or `a-b` range) into a BlockList; false if invalid. */
function addAddress(list: BlockList, raw: string): boolean {
  const a = raw.trim();
  try {
    if (!a.includes('-')) {
      const [net, bits, extra] = a.split('/');
      const fam = isIP(net ?? '');
      const n = Number(bits);
      if (
        fam === 0 ||
        extra !== undefined ||
        bits === undefined ||
        !/^\d+$/.test(bits) ||
        n > (fam === 4 ? 32 : 128)
      )
        return false;
      list.addSubnet(net as string, n, fam === 4 ? 'ipv4' : 'ipv6');
      return true;
    }
    const [from, to] = a.split('-', 2).map((s) => s.trim()) as [string, string];
    const fam = isIP(from);
    if (fam === 0 || isIP(to) !== fam) return false;
    list.addRange(from, to, fam === 4 ? 'ipv4' : 'ipv6');
    return true;
  } catch {
    return false; // start after end, and the like: MetalLB refuses such a pool
  }
}

/** Whether `ip` lies in any of a pool's `spec.addresses`. */
export function poolContains(addresses: readonly string[], ip: string): boolean {
  const fam = isIP(ip);
  if (fam === 0) return false;
  const list = new BlockList();
  let any = false;
  for (const a of addresses) any = addAddress(list, a) || any;
  return any && list.check(ip, fam === 4 ? 'ipv4' : 'ipv6');
}

/** speaker/main.go `poolFor`: the pool holding every one of the service's IPs. */
export function poolFor(pools: Iterable<IPAddressPool>, ips: readonly string[]): IPAddressPool | undefined {
  // Go ranges over a map; MetalLB refuses overlapping pools, so at most one can match. By name here.
  const sorted = [...pools].sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''));
  return sorted.find((p) => ips.length > 0 && ips.every((ip) => poolContains(p.spec?.addresses ?? [], ip)));
}

/** config.go `setL2AdvertisementsToPools`: names or selectors; neither given = every pool. */
export function advertisesPool(ad: L2Advertisement, pool: IPAddressPool): boolean {
  const names = ad.spec?.ipAddressPools ?? [];
  const sels = ad.spec?.ipAddressPoolSelectors ?? [];
  if (names.length === 0 && sels.length === 0) return true;
  return (
    names.includes(pool.metadata?.name ?? '') || sels.some((s) => selectorMatches(s, pool.metadata?.labels))
  );
}

/** v0.16 `l2AdsForService`: an advertisement with service selectors applies only to services they match. */
export function adAppliesToService(ad: L2Advertisement, svc: Service): boolean {
  const sels = ad.spec?.serviceSelectors ?? [];
  return sels.length === 0 || sels.some((s) => selectorMatches(s, svc.metadata?.labels));
}

/**
 * config.go `selectedNodes` (an L2Advertisement's `Nodes`): the existing Node objects its node
 * selectors match, every existing Node when it has none. A name without a Node object is never in it.
 */
export function adSelectsNode(ad: L2Advertisement, node: Node | undefined): boolean {
  if (!node) return false;
  const sels = ad.spec?.nodeSelectors ?? [];
  return sels.length === 0 || sels.some((s) => selectorMatches(s, node.metadata?.labels));
}

/** `epslices.EndpointCanServe`: ready true or absent, or else serving true. */
export function endpointCanServe(
  c: { ready?: boolean | null; serving?: boolean | null } | undefined,
): boolean {
  if (c?.ready == null || c.ready) return true;
  return c.serving === true;
}

/** The endpoint's node: `nodeName` (discovery/v1), else the v1beta1 `kubernetes.io/hostname` topology. */
export const endpointNode = (e: NonNullable<EndpointSlice['endpoints']>[number]): string | undefined =>
  e.nodeName ?? e.topology?.[HOSTNAME_LABEL];

/** The service's slices: its namespace and the `kubernetes.io/service-name` label (epslices.ServiceKeyForSlice). */
export function slicesOf(svc: Service, slices: Iterable<EndpointSlice>): EndpointSlice[] {
  const ns = svc.metadata?.namespace;
  const name = svc.metadata?.name;
  return [...slices].filter(
    (s) => s.metadata?.namespace === ns && s.metadata?.labels?.[SERVICE_NAME_LABEL] === name,
  );
}

/** `activeEndpointExists`: some endpoint of the service can serve. */
export const activeEndpointExists = (slices: readonly EndpointSlice[]) =>
  slices.some((s) => (s.endpoints ?? []).some((e) => endpointCanServe(e.conditions)));

/** `nodesWithEndpoint`: candidates with an endpoint that can serve on them. */
export function nodesWithEndpoint(
  slices: readonly EndpointSlice[],
  candidates: ReadonlySet<string>,
): string[] {
  const out = new Set<string>();
  for (const s of slices)
    for (const e of s.endpoints ?? []) {
      const n = endpointNode(e);
      if (n && endpointCanServe(e.conditions) && candidates.has(n)) out.add(n);
    }
  return [...out];
}

/**
 * `IsNetworkUnavailable` / `IsNodeExcludedFromBalancers` (label present, any value); a missing Node
 * passes both. With `ignoreExcludeLb` (speakersForPool's `!c.ignoreExcludeLB && …`) the label counts for nothing.
 */
export function nodeExcluded(node: Node | undefined, ignoreExcludeLb = false): boolean {
  if (!node) return false;
  if (!ignoreExcludeLb && node.metadata?.labels && EXCLUDE_LABEL in node.metadata.labels) return true;
  return (
    node.status?.conditions?.some((c) => c.type === 'NetworkUnavailable' && c.status === 'True') ?? false
  );
}

/** The announcing node for a VIP: candidates ordered by sha256(node + "#" + VIP), first wins. */
export function owner(candidates: readonly string[], vip: string): string | undefined {
  return rank(candidates, vip)[0];
}

/** Candidates in MetalLB's order: sha256(node + "#" + first LB IP), compared bytewise. */
export function rank(candidates: readonly string[], vip: string): string[] {
  const key = (n: string) => createHash('sha256').update(`${n}#${vip}`).digest('hex');
  return [...candidates].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

/** The service's LoadBalancer IPs, in status order (MetalLB announces all, elects on the first). */
export const lbIPs = (s: Service): string[] => (s.status?.loadBalancer?.ingress ?? []).map((i) => i.ip ?? '');

/**
 * `controller.SetBalancer` (speaker/main.go) up to and including `layer2Controller.ShouldAnnounce`
 * (v0.16): whether `self` announces this service, and why not.
 */
export function shouldAnnounce(i: AnnounceInput): AnnounceDecision {
  const svc = i.service;
  const no = (
    reason: AnnounceDecision['reason'],
    ips: string[] = [],
    candidates: string[] = [],
    interfaces: string[] = [],
  ) => ({ reason, ips, candidates, interfaces });
  // (`no('')` is the one yes: MetalLB's empty reason.)
  if (svc.spec?.type !== 'LoadBalancer') return no('notLoadBalancer');
  const ips = lbIPs(svc);
  if (ips.length === 0) return no('noIPAllocated');
  if (ips.some((ip) => isIP(ip) === 0)) return no('invalidIP');
  const pool = poolFor(i.pools, ips);
  if (!pool) return no('ipNotAllowed', ips);
  const slices = slicesOf(svc, i.endpointSlices);
  if (!activeEndpointExists(slices)) return no('notOwner', ips);
  const ads = [...i.l2Advertisements].filter((ad) => advertisesPool(ad, pool) && adAppliesToService(ad, svc));
  const nodes = new Map<string, Node>();
  for (const n of i.nodes) if (n.metadata?.name) nodes.set(n.metadata.name, n);
  const selected = (name: string) => ads.some((ad) => adSelectsNode(ad, nodes.get(name)));
  if (!selected(i.self)) return no('noMatchingAdvertisement', ips);
  // speakersForAds: live members, not excluded, selected by one of the service's advertisements.
  const speakers = new Set(
    [...i.live].filter((n) => !nodeExcluded(nodes.get(n), i.ignoreExcludeLb) && selected(n)),
  );
  const available =
    svc.spec?.externalTrafficPolicy === 'Local' ? nodesWithEndpoint(slices, speakers) : [...speakers];
  const candidates = rank(available, ips[0] as string);
  if (candidates[0] !== i.self) return no('notOwner', ips, candidates);
  const mine = ads.filter((ad) => adSelectsNode(ad, nodes.get(i.self)));
  return no('', ips, candidates, advertisedInterfaces(mine));
}

/**
 * `ipAdvertisementFor`: the interfaces the advertisements selecting this node list, together;
 * none (every interface) as soon as one lists none.
 */
export function advertisedInterfaces(ads: readonly L2Advertisement[]): string[] {
  if (ads.some((ad) => (ad.spec?.interfaces ?? []).length === 0)) return [];
  return [...new Set(ads.flatMap((ad) => ad.spec?.interfaces ?? []))].sort();
}
