// When to fence this node's own API server, pure (the I/O is guard.ts). The report
// drainguard was written for: a control-plane node is drained, its etcd member removed, and its
// API server keeps running with no etcd behind it — it accepts connections, answers cached lists
// and keeps watches open and silent, while consistent reads and writes hang (docs/lab-cluster.md).
// MetalLB's speakers on every node read through the `kubernetes` Service; a speaker whose watch
// landed on that server never sees the drained node's exclude label, so the VIP can go dark (the
// drained node's own speaker withdrew) until memberlist's failure detection, seconds later.
//
// The rule: while this node drains (or its speaker pod goes away), an API server on one of this
// node's addresses that does not answer a consistent read of one object within
// LOCAL_READ_TIMEOUT_MS, while the same read sent directly to an API server on another host is
// answered, is stale: the connections to it are destroyed and new ones refused (but from loopback)
// until the drain ends. So is one whose read stays unanswered while the etcd member on this node,
// seen listening before, no longer listens (it exited on its removal): no need then to wait for
// the others, which are out for an election when the removed member led etcd. With no API server on another host, never: a slow read of the only one
// must not cut the cluster off it (the Service's answer would come from this very server).
// Not when it answers again: one whose member was added back answers consistent reads from etcd
// at once, while its watch cache may stay frozen for minutes (robustness CONTROL_PLANES=3 SEED=4
// TRIAL=8: a kubelet and a sidecar blind on it after such a lift). A server that refuses connections (stopped) or that this sidecar cannot judge (TLS, RBAC)
// is never fenced.
import { isApiError } from '../../shared/kube/api-error.ts';
import { type ApiEndpoint, sameApiFence } from './fence.ts';

/**
 * A consistent GET of one Node takes milliseconds on a healthy API server (an etcd range read);
 * one whose etcd member is gone holds it for 60 s. The same bound the client hedges small
 * requests at (HEDGE_AFTER_MS).
 */
export const LOCAL_READ_TIMEOUT_MS = 750;

/** A local read not answered this long: the same read is sent to the API servers on other hosts. */
export const CLUSTER_READ_AFTER_MS = 100;

/** How long the API servers on other hosts are given to answer that read (an etcd election's ~1–2 s). */
export const OTHER_READ_TIMEOUT_MS = 2_000;

/**
 * A local read is held this long at most. Past LOCAL_READ_TIMEOUT_MS it is judged as soon as
 * another API server has answered and it stayed silent STILL_SILENT_MS after (silentWhileOthersAnswer):
 * when the removed member led etcd, the whole API is out for the election (~1.2 s here), and a
 * read sent during it proves the local server stale once the others answer again — not one
 * LOCAL_READ_TIMEOUT_MS after the next probe (issue 23: the API through the VIP out 2.3 s).
 */
export const LOCAL_READ_MAX_MS = 3_000;

/** How long a local read must stay unanswered after another API server answered. */
export const STILL_SILENT_MS = 250;

/**
 * Whether a local read sent at `sentAt` and not answered by `now` proves its server stale: held at
 * least LOCAL_READ_TIMEOUT_MS, and another API server answered a consistent read after it was sent
 * and at least STILL_SILENT_MS ago (a healthy local server, held by an election too, answers
 * within milliseconds of the others).
 */
export function silentWhileOthersAnswer(
  now: number,
  sentAt: number,
  othersAnsweredAt: number | undefined,
): boolean {
  if (othersAnsweredAt === undefined || othersAnsweredAt < sentAt) return false;
  return now - sentAt >= LOCAL_READ_TIMEOUT_MS && now - othersAnsweredAt >= STILL_SILENT_MS;
}

/**
 * The etcd client port a stacked control plane's member listens on, on loopback (kubeadm and RKE2
 * alike: the API server's --etcd-servers is https://127.0.0.1:2379). A removed member applies its
 * own removal and exits (docs/lab-cluster.md): nothing listens on the port from then on.
 */
export const LOCAL_ETCD_CLIENT_PORT = 2379;

/**
 * How long a local read must stay unanswered, and the local etcd member's port unlistened, for the
 * member's exit to prove the API server here stale without waiting for the others: when the removed
 * member led etcd, the others are out for the election (~1.3 s here) and cannot answer sooner.
 */
export const ETCD_GONE_READ_MS = 250;

/** The local etcd client port: a socket listens on it, none does, or it could not be read. */
export type LocalEtcdCheck = 'listening' | 'gone' | 'unknown';

/** What the checks of the local etcd member's port said. */
export interface LocalEtcdView {
  /** It listened while this sidecar ran: an etcd member runs (or ran) on this node. */
  seenListening: boolean;
  /** Nothing listened at every check since then (undefined: it listens, or could not be judged). */
  goneSince: number | undefined;
}

export const NO_LOCAL_ETCD: LocalEtcdView = { seenListening: false, goneSince: undefined };

/** The view after one more check at `now`. An unknown check breaks a run of absences. */
export function nextLocalEtcd(v: LocalEtcdView, check: LocalEtcdCheck, now: number): LocalEtcdView {
  if (check === 'listening') return { seenListening: true, goneSince: undefined };
  if (check === 'gone' && v.seenListening) return { ...v, goneSince: v.goneSince ?? now };
  return { ...v, goneSince: undefined };
}

/**
 * Whether a local read sent at `sentAt` and not answered by `now` proves its server stale by the
 * local etcd member's exit: the member listened while this sidecar ran and has not for
 * ETCD_GONE_READ_MS, and the read has been held as long. Nothing here knows the server's
 * --etcd-servers: one that names other members too usually answers through them within that time
 * and is not judged so, but one held by an election (its member led etcd) is, like a server whose
 * member merely restarts while the node drains; either stays fenced until the drain ends
 * (docs/l2-handover.md, issue 42 item 9).
 */
export function etcdGoneWhileSilent(now: number, sentAt: number, etcd: LocalEtcdView): boolean {
  return etcdGoneLongEnough(now, etcd) && now - sentAt >= ETCD_GONE_READ_MS;
}

/**
 * Whether the local etcd member, seen listening while this sidecar ran, has not for
 * ETCD_GONE_READ_MS: a local read that failed (a 5xx, a timeout) meanwhile proves its server stale.
 */
export function etcdGoneLongEnough(now: number, etcd: LocalEtcdView): boolean {
  return etcd.seenListening && etcd.goneSince !== undefined && now - etcd.goneSince >= ETCD_GONE_READ_MS;
}

/** How often the local API server is asked while this node drains and it is not fenced. */
export const PROBE_INTERVAL_MS = 250;

/** The EndpointSlice fields read (discovery.k8s.io v1 and v1beta1 alike). */
export interface ApiEndpointSlice {
  addressType?: string;
  endpoints?: { addresses?: string[] }[] | null;
  ports?: { port?: number; protocol?: string }[] | null;
}

/**
 * The API servers of the `kubernetes` Service's EndpointSlices, each address with each TCP port:
 * `local` on one of the node's own addresses, `others` on other hosts.
 */
export function apiEndpointsOf(
  slices: readonly ApiEndpointSlice[],
  ownAddresses: readonly string[],
): { local: ApiEndpoint[]; others: ApiEndpoint[] } {
  const own = new Set(ownAddresses.map((a) => a.toLowerCase()));
  const local: ApiEndpoint[] = [];
  const others: ApiEndpoint[] = [];
  for (const s of slices) {
    const ports = (s.ports ?? [])
      .filter((p) => (p.protocol ?? 'TCP') === 'TCP' && typeof p.port === 'number')
      .map((p) => p.port as number);
    for (const e of s.endpoints ?? [])
      for (const a of e.addresses ?? []) {
        const address = a.toLowerCase();
        for (const port of ports) (own.has(address) ? local : others).push({ address, port });
      }
  }
  return { local, others };
}

/** The API servers on this node (apiEndpointsOf's `local`). */
export const localApiEndpoints = (slices: readonly ApiEndpointSlice[], ownAddresses: readonly string[]) =>
  apiEndpointsOf(slices, ownAddresses).local;

/**
 * What one consistent read of the own Node from the local API server says about it:
 * `answered` — it reads etcd (a 404 too); `no-answer` — timed out, or a 5xx (a stale server's
 * writes fail with 500, its reads end in 504); `refused` — no server there (refused, reset,
 * unreachable): nothing to fence; `unknown` — it could not be judged (TLS, 401/403, 429).
 */
export type LocalAnswer = 'answered' | 'no-answer' | 'refused' | 'unknown';

export function classifyLocalRead(err: unknown): LocalAnswer {
  if (err === undefined) return 'answered';
  if (!isApiError(err)) return 'unknown';
  if (err.code === 0) {
    if (/timed out/i.test(err.detail)) return 'no-answer';
    if (/ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ENETUNREACH|socket hang up/i.test(err.detail)) return 'refused';
    return 'unknown';
  }
  if (err.code >= 500) return 'no-answer';
  if (err.code === 401 || err.code === 403 || err.code === 429) return 'unknown';
  return 'answered';
}

/** One probe: the local read's answer, and (after a no-answer) whether another API server answered. */
export interface ProbeResult {
  at: number;
  local: LocalAnswer;
  /** The local etcd member exited meanwhile (etcdGoneWhileSilent): stale without the others' answer. */
  etcdGone?: boolean;
  /**
   * The same read sent directly to the API servers on other hosts: one answered (asked only after
   * a no-answer). Not through the `kubernetes` Service: with one API server, or the others down,
   * the Service's answer comes from this very server (slow, not stale), and fencing it would cut
   * the cluster off its only API server until the drain ends — which then could not be seen.
   */
  clusterAnswered?: boolean;
  /** Why, for the Event: the local read's error. */
  detail?: string;
}

export interface StaleApiObservation {
  now: number;
  /** This node drains, or the guarded pod is going away: a handover is wanted. */
  wanted: boolean;
  /** DRAINGUARD_FENCE_STALE_API_SERVER. */
  enabled: boolean;
  /** The API servers on this node (apiEndpointsOf's `local`), as last read. */
  endpoints: ApiEndpoint[];
  /** The API servers on other hosts, as last read: none, and this node's is never fenced. */
  others: ApiEndpoint[];
  /** The latest probe that settled, if any since the drain began. */
  probe: ProbeResult | undefined;
  /** The fence installed now (read back), or undefined. */
  installed: ApiEndpoint[] | undefined;
}

export type StaleApiDecision =
  | { kind: 'fence'; endpoints: ApiEndpoint[]; why: string }
  | { kind: 'unfence'; why: string }
  | undefined;

/**
 * Whether the rule applies now: the node drains, or the speaker pod goes away (its handover's
 * peers may be blind all the same); not a restart of the guarded container alone, which is no news
 * about this node. A fence left by a pod that went away is lifted by the next pod's sidecar unless
 * the node drains.
 */
export const fenceWanted = (nodeDraining: boolean, podTerminating: boolean): boolean =>
  nodeDraining || podTerminating;

/** Whether this probe proves the local API server stale. */
export const provesStale = (p: ProbeResult | undefined): boolean =>
  p !== undefined && p.local === 'no-answer' && (p.clusterAnswered === true || p.etcdGone === true);

export function decideApiFence(o: StaleApiObservation): StaleApiDecision {
  if (o.installed) {
    if (!o.wanted) return { kind: 'unfence', why: 'the drain is over' };
    if (!o.enabled) return { kind: 'unfence', why: 'fencing a stale API server is turned off' };
    // The endpoints read since may name more (another address of the same server).
    if (provesStale(o.probe) && o.endpoints.length > 0 && !sameApiFence(o.installed, o.endpoints))
      return { kind: 'fence', endpoints: o.endpoints, why: o.probe?.detail ?? 'no answer' };
    return undefined;
  }
  if (!o.wanted || !o.enabled || o.endpoints.length === 0 || o.others.length === 0 || !provesStale(o.probe))
    return undefined;
  return { kind: 'fence', endpoints: o.endpoints, why: o.probe?.detail ?? 'no answer' };
}

/** Whether a probe is due now: while a handover is wanted, an API server runs here, not fenced yet. */
export function probeDue(
  o: Pick<StaleApiObservation, 'now' | 'wanted' | 'enabled' | 'endpoints' | 'others' | 'installed'>,
  lastProbeAt: number,
): boolean {
  if (!o.wanted || !o.enabled || o.endpoints.length === 0 || o.others.length === 0 || o.installed)
    return false;
  return o.now - lastProbeAt >= PROBE_INTERVAL_MS;
}
