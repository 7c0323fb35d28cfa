// Reads the API server's audit log (Metadata level, one JSON event per line; lab/bed/control-plane.ts
// auditLog) and counts what each sidecar asked for. A sidecar is known by its user agent
// (`drainguard-sidecar/<node>`, shared/kube/client.ts), so sidecars sharing one process or one
// service account are still told apart.
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';

export interface AuditEvent {
  auditID: string;
  stage: string;
  verb: string;
  requestURI: string;
  userAgent?: string;
  objectRef?: { resource?: string; subresource?: string; apiGroup?: string };
  responseStatus?: { code?: number };
  requestReceivedTimestamp: string;
  stageTimestamp: string;
}

/** One request, seen once however many stages it logged. */
export interface Request {
  id: string;
  agent: string;
  verb: string;
  /** resource[/subresource], e.g. nodes, pods/status, leases. */
  resource: string;
  /** The request's path without its query: a LIST and the WATCH of the same view share it. */
  path: string;
  /** A field or label selector narrowed it (a wide read has none). */
  selected: boolean;
  /** A later page of a paged LIST (it carries `continue`): the first page starts a list. */
  continued: boolean;
  code: number;
  at: number;
  /** When a watch ended (undefined: still open when the log was read). */
  endedAt?: number;
}

const SIDECAR_AGENT = /^drainguard-sidecar\/(.+)$/;

/** The node a sidecar's request came from, or undefined for anyone else's. */
export const sidecarNode = (agent: string): string | undefined => SIDECAR_AGENT.exec(agent)?.[1];

/** Every request in the log, once each; watches carry when they ended. */
export async function readAudit(path: string): Promise<Request[]> {
  const byId = new Map<string, Request>();
  const lines = createInterface({ input: createReadStream(path), crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line) continue;
    const e = JSON.parse(line) as AuditEvent;
    let r = byId.get(e.auditID);
    if (!r) {
      const ref = e.objectRef;
      const resource = ref?.resource
        ? `${ref.resource}${ref.subresource ? `/${ref.subresource}` : ''}`
        : e.requestURI.split('?')[0]!;
      r = {
        id: e.auditID,
        agent: e.userAgent ?? '',
        verb: e.verb,
        resource,
        path: e.requestURI.split('?')[0]!,
        selected: /[?&](field|label)Selector=/.test(e.requestURI),
        continued: /[?&]continue=/.test(e.requestURI),
        code: e.responseStatus?.code ?? 0,
        at: Date.parse(e.requestReceivedTimestamp),
      };
      byId.set(e.auditID, r);
    }
    if (e.stage === 'ResponseComplete' || e.stage === 'Panic') {
      r.code = e.responseStatus?.code ?? r.code;
      if (r.verb === 'watch') r.endedAt = Date.parse(e.stageTimestamp);
    }
  }
  return [...byId.values()];
}

export interface SidecarCounts {
  /** Requests in the window by `VERB resource`. */
  byVerbResource: Record<string, number>;
  requests: number;
  /** LISTs of a view the same sidecar also watches: its informer listed again. */
  relists: number;
  /** Requests answered 410 Gone (a watch's 410 inside its stream is counted from the sidecar's log). */
  gone: number;
  /** Watches open at the end of the window. */
  standingWatches: number;
}

/**
 * Counts per sidecar (node name) over [from, to): requests started in the window. A LIST of a
 * path the sidecar also WATCHes (at any time) is an informer's list; every one in a window
 * after warm-up is a re-list.
 */
export function countPerSidecar(
  requests: readonly Request[],
  nodes: readonly string[],
  from: number,
  to: number,
): Map<string, SidecarCounts> {
  const out = new Map<string, SidecarCounts>();
  const watched = new Map<string, Set<string>>();
  for (const node of nodes) {
    out.set(node, { byVerbResource: {}, requests: 0, relists: 0, gone: 0, standingWatches: 0 });
    watched.set(node, new Set());
  }
  for (const r of requests) {
    const node = sidecarNode(r.agent);
    if (node !== undefined && r.verb === 'watch') watched.get(node)?.add(r.path);
  }
  for (const r of requests) {
    const node = sidecarNode(r.agent);
    const c = node === undefined ? undefined : out.get(node);
    if (!c) continue;
    if (r.verb === 'watch' && r.at < to && (r.endedAt === undefined || r.endedAt >= to)) c.standingWatches++;
    if (r.at < from || r.at >= to) continue;
    const key = `${r.verb.toUpperCase()} ${r.resource}`;
    c.byVerbResource[key] = (c.byVerbResource[key] ?? 0) + 1;
    c.requests++;
    if (r.verb === 'list' && watched.get(node!)?.has(r.path)) c.relists++;
    if (r.code === 410) c.gone++;
  }
  return out;
}

/** Sums of counts, scaled to per sidecar per hour over a window of `ms`. */
export function perSidecarHour(counts: readonly SidecarCounts[], ms: number) {
  const n = Math.max(counts.length, 1);
  const scale = 3_600_000 / ms / n;
  const byVerbResource: Record<string, number> = {};
  let requests = 0;
  let relists = 0;
  let gone = 0;
  let watches = 0;
  for (const c of counts) {
    requests += c.requests;
    relists += c.relists;
    gone += c.gone;
    watches += c.standingWatches;
    for (const [k, v] of Object.entries(c.byVerbResource)) byVerbResource[k] = (byVerbResource[k] ?? 0) + v;
  }
  const r1 = (x: number) => Math.round(x * 10) / 10;
  return {
    requests: r1(requests * scale),
    relists: r1(relists * scale),
    gone: r1(gone * scale),
    standingWatches: r1(watches / n),
    byVerbResource: Object.fromEntries(
      Object.entries(byVerbResource)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => [k, r1(v * scale)]),
    ),
  };
}
