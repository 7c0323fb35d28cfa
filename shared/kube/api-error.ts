// What a failed request to the API server says: the typed error (its code, reason, Retry-After),
// whether it is worth retrying, whether it says the API server is down or answered no, and a
// watch ended on purpose. Shared by the client, the informer and every caller that decides on it.

/** A non-2xx answer (or a transport failure, code 0) from the API server. */
export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly method: string;
  readonly path: string;
  /** The server's Retry-After (429, 503), in ms: wait at least this long before asking again. */
  readonly retryAfterMs: number | undefined;
  /** The server's message alone. */
  readonly detail: string;
  constructor(
    method: string,
    path: string,
    code: number,
    reason: string,
    message: string,
    retryAfterMs?: number,
  ) {
    super(`${method} ${path}: ${code === 0 ? 'unreachable' : code} ${reason}: ${message}`);
    this.name = 'ApiError';
    this.code = code;
    this.reason = reason;
    this.method = method;
    this.path = path;
    this.retryAfterMs = retryAfterMs;
    this.detail = message;
  }
  /** Worth retrying: unreachable, timeout, throttled (429, API priority and fairness), server errors. */
  get retryable(): boolean {
    return this.code === 0 || this.code === 429 || this.code === 408 || this.code >= 500;
  }
}

export const isApiError = (e: unknown, code?: number): e is ApiError =>
  e instanceof ApiError && (code === undefined || e.code === code);

/** Retry-After in seconds (what the API server sends; an HTTP date is accepted too), capped at 5 min. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  const secs = /^\d+$/.test(v.trim()) ? Number(v.trim()) * 1000 : Date.parse(v) - now;
  return Number.isFinite(secs) && secs >= 0 ? Math.min(secs, 300_000) : undefined;
}

/** How long to wait after an error: the backoff's next step, or the server's Retry-After if longer. */
export function retryDelay(e: unknown, backoffMs: number): number {
  return Math.max(backoffMs, isApiError(e) ? (e.retryAfterMs ?? 0) : 0);
}

/**
 * Whether a failed call says the API server is down — unreachable, timed out, shedding load (429)
 * or failing (5xx) — rather than answering no to this one request (401, 403 from RBAC, 404 for a
 * missing CRD, 409, 410): those are answers from a live server. A failure with no error at all
 * is unreachable.
 */
export function countsAsApiDown(err: ApiError | undefined): boolean {
  return err === undefined || err.retryable;
}

/** Refused before anything was sent: the request may go again on a new connection, whatever its method. */
export const refusedAtConnect = (e: unknown): boolean =>
  e instanceof ApiError && e.code === 0 && /^connect ECONNREFUSED\b/.test(e.detail);

/**
 * How long a watch may stay silent before it is re-opened: a peer gone without a FIN (a dropped
 * NAT entry, a black-holed path) would keep it silent forever. Above the bookmark period: a 1.20
 * API server sends each watch a bookmark about once a minute (measured 60 s after the open) and
 * 2 s before its timeout, so a quiet but healthy watch always hears something within this limit.
 * At 45 s (client-go's HTTP/2 health check) a quiet watch was re-opened before its first bookmark,
 * its resourceVersion never advanced, and once the watch cache moved past it (75 s of history or
 * more) the re-open got 410 and the informer re-listed: 4 LISTs in 290 s on one quiet Node.
 * A half-open connection is still noticed within two minutes; the kernel's TCP keepalive notices a
 * peer that stopped answering sooner.
 */
export const WATCH_IDLE_MS = 110_000;

/** A watch that was silent for the idle limit: ended by us, not an API failure. */
export class WatchIdle extends Error {
  constructor(ms: number, why?: string) {
    super(why ?? `watch silent for ${ms} ms: re-opened`);
    this.name = 'WatchIdle';
  }
}

/** reason and message of a Kubernetes Status body (a failed request's); nothing when the body is not one. */
export function parseApiStatusBody(text: string): { reason?: string; message?: string } {
  try {
    const st = JSON.parse(text) as { reason?: unknown; message?: unknown } | null;
    return {
      ...(typeof st?.reason === 'string' ? { reason: st.reason } : {}),
      ...(typeof st?.message === 'string' ? { message: st.message } : {}),
    };
  } catch {
    return {};
  }
}
