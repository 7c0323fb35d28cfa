// Which other nodes could announce at all (otherCandidates: never strand a VIP) and which of them
// MetalLB would let announce a given service (its `ShouldAnnounce`, per service), pure. Read when
// a handover starts, so the exclude label is added only when every service announced here has
// somewhere to go, and only such a node's ServiceL2Status confirms.
import { type LabelSelector, selectorMatches } from '../../shared/kube/selector.ts';
import type { Node, Pod } from '../../shared/kube/types.ts';
import { EXCLUDE_LABEL } from '../../shared/names.ts';
import { inAddresses } from '../../shared/net/address-pool.ts';

export interface AddressPool {
  name: string;
  labels: Record<string, string>;
  addresses: string[];
}

export interface L2Advertisement {
  name: string;
  ipAddressPools: string[];
  ipAddressPoolSelectors: LabelSelector[];
  nodeSelectors: LabelSelector[];
}

/** MetalLB's configuration as read at the handover's start; undefined when it cannot be read. */
export interface MetalLbConfig {
  pools: AddressPool[];
  l2Advertisements: L2Advertisement[];
}

export interface ServiceFacts {
  /** namespace/name */
  service: string;
  ips: string[];
  /** externalTrafficPolicy: Local — only nodes with a ready endpoint may announce. */
  local: boolean;
  /** Nodes with a ready endpoint (read for Local services only). */
  readyEndpointNodes?: string[];
}

/**
 * Nodes other than `self` where a Ready speaker of the same DaemonSet runs (every node when the
 * own pod has no controller) and that MetalLB would consider: schedulable, no exclude label,
 * Ready, network available. Per-service narrowing (L2Advertisement node selectors, endpoints of
 * Local services) is eligibleFor's.
 */
export function otherCandidates(
  nodes: Node[],
  speakerPods: Pod[],
  self: string,
  ownerUid: string | undefined,
): string[] {
  const ready = (p: Pod) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
  const speakerNodes = ownerUid
    ? new Set(
        speakerPods
          .filter((p) => !p.metadata?.deletionTimestamp && ready(p))
          .filter((p) => p.metadata?.ownerReferences?.some((o) => o.uid === ownerUid))
          .map((p) => p.spec?.nodeName),
      )
    : undefined;
  return nodes
    .filter((n) => {
      const name = n.metadata?.name ?? '';
      if (!name || name === self) return false;
      if (speakerNodes && !speakerNodes.has(name)) return false;
      if (n.spec?.unschedulable) return false;
      if (n.metadata?.labels && EXCLUDE_LABEL in n.metadata.labels) return false;
      const cond = (type: string) => n.status?.conditions?.find((c) => c.type === type)?.status;
      if (cond('Ready') !== 'True') return false;
      if (cond('NetworkUnavailable') === 'True') return false;
      return true;
    })
    .map((n) => n.metadata?.name ?? '')
    .sort();
}

/** The Node conditions otherCandidates reads. */
const NODE_CONDITIONS = new Set(['Ready', 'NetworkUnavailable']);

/**
 * What otherCandidates and eligibleFor read of a Node (name, labels, unschedulable, the Ready and
 * NetworkUnavailable conditions), nothing else: a realistic Node is ~13 KiB (images, addresses,
 * managedFields), this is a few hundred bytes, so a view of thousands of Nodes stays small.
 */
export function trimNode(n: Node): Node {
  const m = n.metadata ?? {};
  return {
    metadata: {
      ...(m.name === undefined ? {} : { name: m.name }),
      ...(m.resourceVersion === undefined ? {} : { resourceVersion: m.resourceVersion }),
      ...(m.labels === undefined ? {} : { labels: m.labels }),
    },
    spec: n.spec?.unschedulable ? { unschedulable: true } : {},
    status: {
      conditions: (n.status?.conditions ?? [])
        .filter((c) => NODE_CONDITIONS.has(c.type))
        .map((c) => ({ type: c.type, status: c.status })),
    },
  };
}

/** What otherCandidates reads of a speaker pod: its node, owners, deletion and Ready condition. */
export function trimPod(p: Pod): Pod {
  const m = p.metadata ?? {};
  return {
    metadata: {
      ...(m.name === undefined ? {} : { name: m.name }),
      ...(m.namespace === undefined ? {} : { namespace: m.namespace }),
      ...(m.resourceVersion === undefined ? {} : { resourceVersion: m.resourceVersion }),
      ...(m.deletionTimestamp === undefined ? {} : { deletionTimestamp: m.deletionTimestamp }),
      ...(m.ownerReferences === undefined
        ? {}
        : {
            ownerReferences: m.ownerReferences.map(({ apiVersion, kind, name, uid }) => ({
              apiVersion,
              kind,
              name,
              uid,
            })),
          }),
    },
    spec: p.spec?.nodeName === undefined ? {} : { nodeName: p.spec.nodeName },
    status: {
      conditions: (p.status?.conditions ?? [])
        .filter((c) => c.type === 'Ready')
        .map((c) => ({ type: c.type, status: c.status })),
    },
  };
}

/**
 * The candidates (other nodes: Ready, schedulable, not excluded, a Ready speaker) that may
 * announce this service: for `externalTrafficPolicy: Local` only those with a ready endpoint, and
 * only those an L2Advertisement of the VIP's pool selects. Where MetalLB's configuration is not
 * known, or the VIP is in no known pool (then it is not announced by this configuration either),
 * the node selectors do not narrow the list.
 */
export function eligibleFor(
  svc: ServiceFacts,
  candidates: readonly string[],
  nodeLabels: ReadonlyMap<string, Record<string, string>>,
  metallb: MetalLbConfig | undefined,
): string[] {
  let out = [...candidates];
  if (svc.local) {
    const ready = new Set(svc.readyEndpointNodes ?? []);
    out = out.filter((n) => ready.has(n));
  }
  const ads = metallb ? advertisementsFor(svc.ips, metallb) : undefined;
  if (ads && ads.length > 0)
    out = out.filter((n) =>
      ads.some(
        (ad) =>
          ad.nodeSelectors.length === 0 ||
          ad.nodeSelectors.some((s) => selectorMatches(s, nodeLabels.get(n))),
      ),
    );
  return out.sort();
}

/** The L2Advertisements that advertise the pool the VIPs belong to; undefined when no pool holds them. */
export function advertisementsFor(
  ips: readonly string[],
  metallb: MetalLbConfig,
): L2Advertisement[] | undefined {
  const ip = ips[0];
  const pool = ip === undefined ? undefined : metallb.pools.find((p) => inAddresses(ip, p.addresses));
  if (!pool) return undefined;
  return metallb.l2Advertisements.filter((ad) => {
    if (ad.ipAddressPools.length === 0 && ad.ipAddressPoolSelectors.length === 0) return true;
    return (
      ad.ipAddressPools.includes(pool.name) ||
      ad.ipAddressPoolSelectors.some((s) => selectorMatches(s, pool.labels))
    );
  });
}

interface EndpointSliceLike {
  endpoints?: {
    nodeName?: string;
    topology?: Record<string, string>;
    conditions?: { ready?: boolean | null; serving?: boolean | null };
  }[];
}

/**
 * Nodes with an endpoint that can serve in these EndpointSlices, as MetalLB's `EndpointCanServe`:
 * `ready` true or absent (the API's rule), or `serving` true (a terminating endpoint); the node is `nodeName` (discovery/v1) or the `kubernetes.io/hostname` topology key of
 * discovery/v1beta1, which equals the node name where the kubelet sets it.
 */
export function readyEndpointNodes(slices: readonly EndpointSliceLike[]): string[] {
  const nodes = new Set<string>();
  for (const s of slices)
    for (const e of s.endpoints ?? []) {
      // MetalLB's EndpointCanServe: ready (or not said), or else serving.
      if (e.conditions?.ready === false && e.conditions.serving !== true) continue;
      const node = e.nodeName ?? e.topology?.['kubernetes.io/hostname'];
      if (node) nodes.add(node);
    }
  return [...nodes].sort();
}

interface KubeObjectLike {
  metadata?: { name?: string; labels?: Record<string, string> };
  spec?: Record<string, unknown>;
}

/** Reads IPAddressPool and L2Advertisement objects (metallb.io/v1beta1) into plain data. */
export function metallbConfigFrom(
  pools: readonly KubeObjectLike[],
  ads: readonly KubeObjectLike[],
): MetalLbConfig {
  const list = <T>(v: unknown) => (Array.isArray(v) ? (v as T[]) : []);
  return {
    pools: pools.map((p) => ({
      name: p.metadata?.name ?? '',
      labels: p.metadata?.labels ?? {},
      addresses: list<string>(p.spec?.addresses).filter((a) => typeof a === 'string'),
    })),
    l2Advertisements: ads.map((a) => ({
      name: a.metadata?.name ?? '',
      ipAddressPools: list<string>(a.spec?.ipAddressPools),
      ipAddressPoolSelectors: list<LabelSelector>(a.spec?.ipAddressPoolSelectors),
      nodeSelectors: list<LabelSelector>(a.spec?.nodeSelectors),
    })),
  };
}
