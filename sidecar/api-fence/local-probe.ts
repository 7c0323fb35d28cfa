// The probes of this node's own API server, pure: when the local etcd member's port is checked, a
// local read in flight, the ProbeResult it comes to, and which result stands (guard.ts sends the
// reads; core.ts judges the results).
import {
  CLUSTER_READ_AFTER_MS,
  classifyLocalRead,
  LOCAL_ETCD_CLIENT_PORT,
  type LocalEtcdView,
  type ProbeResult,
  provesStale,
  type StaleApiObservation,
} from './core.ts';

/** Outside drains, the local etcd member's port is checked this seldom (seen listening before a drain). */
const ETCD_IDLE_CHECK_MS = 60_000;

/** Whether the local etcd member's port is due a check, last checked at `lastCheckAt`. */
export function etcdCheckDue(o: StaleApiObservation, lastCheckAt: number): boolean {
  if (o.endpoints.length === 0) return false;
  const probing = o.wanted && o.enabled && o.others.length > 0 && !o.installed;
  return probing || o.now - lastCheckAt >= ETCD_IDLE_CHECK_MS;
}

/** A local read in flight: when it was sent; judged stale (and stopped) at `judgedAt`. */
export interface PendingRead {
  sentAt: number;
  stop: AbortController;
  /** The first answer of another API server after it was sent. */
  othersAnsweredAt?: number;
  judgedAt?: number;
  /** Judged by the local etcd member's exit (etcdGoneWhileSilent), not by the others' answer. */
  etcdGone?: boolean;
  /** Stopped because the fence went on: not counted, not a probe result. */
  dropped?: boolean;
}

/** A read CLUSTER_READ_AFTER_MS late that no answer of the others has followed yet. */
export const waitsOnOthers = (p: PendingRead, now: number): boolean =>
  p.othersAnsweredAt === undefined && now - p.sentAt >= CLUSTER_READ_AFTER_MS;

/** For a probe's detail: how long nothing has listened on the local etcd member's port. */
export function etcdGoneText(etcd: LocalEtcdView, now: number): string {
  const since = etcd.goneSince ?? now;
  return `with nothing listening on the etcd port ${LOCAL_ETCD_CLIENT_PORT} here for ${now - since} ms`;
}

/** What a local read of `path` that ended (with `err`, or none) says: judged while held, or its own outcome. */
export function readResult(read: PendingRead, path: string, err: unknown, etcd: LocalEtcdView): ProbeResult {
  const sentAt = read.sentAt;
  return read.judgedAt !== undefined
    ? {
        at: sentAt,
        local: 'no-answer',
        ...(read.etcdGone ? { etcdGone: true } : { clusterAnswered: true }),
        detail: `GET ${path}: no answer in ${read.judgedAt - sentAt} ms ${read.etcdGone ? etcdGoneText(etcd, read.judgedAt) : 'while another API server answered'}`,
      }
    : {
        at: sentAt,
        local: classifyLocalRead(err),
        ...(err ? { detail: (err as Error).message } : {}),
      };
}

/**
 * Whether `result` replaces the probe kept: the newest read sent wins, but for a proof over a newer
 * read that failed without one (a 5xx back fast, before the held reads are judged).
 */
export function supersedes(result: ProbeResult, kept: ProbeResult | undefined): boolean {
  return kept === undefined || result.at >= kept.at || (provesStale(result) && kept.local === 'no-answer');
}
