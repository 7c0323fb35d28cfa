// What a request to the API server is asked with, and where it goes: the options of a request
// and a watch, the patch types, the URL under the server's own path, and which reads the API
// server answers from its watch cache.

export type PatchType = 'merge' | 'json' | 'strategic';
export const PATCH_CONTENT_TYPE: Record<PatchType, string> = {
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  strategic: 'application/strategic-merge-patch+json',
};

export interface RequestOptions {
  method?: string;
  body?: unknown;
  contentType?: string;
  query?: Record<string, string | number | boolean | undefined>;
  timeoutMs?: number;
  /** Retry retryable failures (not conflicts) this many times with capped backoff; default 0. */
  retries?: number;
  signal?: AbortSignal;
  /**
   * After this long without an answer a second copy goes out on a new connection, and the first
   * answer wins (the other is abandoned). Behind the `kubernetes` Service each connection lands on
   * one API server; one whose etcd member is gone hangs a consistent read or a write until its
   * timeout, and the copy most likely reaches a healthy one. Only for requests that may be sent
   * twice (reads, a merge patch of fixed values). With onText the copy goes out only while no
   * byte of the body has arrived, and the copy whose body starts first is the one streamed (the
   * other is abandoned before any of its text reaches onText).
   */
  hedgeAfterMs?: number;
  /** Return the body as text instead of parsing JSON (/readyz, /version-like endpoints). */
  text?: boolean;
  /**
   * Hand a 2xx body's text to this as it arrives (UTF-8 chunks of up to 64 KiB) instead of holding
   * it whole; the request then resolves undefined. For lists of thousands of objects
   * (paged-list.ts): no buffer of a whole page. A throw ends the request (BadResponse).
   */
  onText?: (chunk: string) => void;
}

export interface WatchEvent<T> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

export interface WatchOptions {
  /** Silence after which the watch is ended with WatchIdle (default WATCH_IDLE_MS; tests shorten it). */
  idleTimeoutMs?: number;
  /** Called once the server accepted the watch (200), before its first event. */
  onOpen?: () => void;
}

/**
 * An API path under the server URL, which may carry a path of its own (Rancher proxies each
 * cluster at `/k8s/clusters/<id>`): appended to it, as kubectl does. (`new URL(path, server)`
 * would drop it: an absolute path replaces the base's.)
 */
export function apiUrl(server: string, path: string, query?: RequestOptions['query']): URL {
  const u = new URL(server);
  const q = path.indexOf('?');
  const [pathname, search] = q < 0 ? [path, ''] : [path.slice(0, q), path.slice(q)];
  u.pathname = `${u.pathname.replace(/\/+$/, '')}${pathname.startsWith('/') ? '' : '/'}${pathname}`;
  u.search = search;
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
  return u;
}

/**
 * Whether an answer came from the API server's watch cache (a read with resourceVersion=0): it says
 * nothing about etcd. An API server whose etcd member is gone still answers such reads at once with
 * old data while consistent reads and writes time out (docs/lab-cluster.md), so only consistent
 * reads and writes count as "the API is up"; failures of any request still count as down.
 */
export function servedFromCache(opts: Pick<RequestOptions, 'method' | 'query'>): boolean {
  return (opts.method ?? 'GET') === 'GET' && String(opts.query?.resourceVersion) === '0';
}
