// The API client (KubeClient): requests with timeouts, retries and hedged copies, and streaming
// watches. Its errors are in api-error.ts, its request options and URLs in request.ts, the wire
// under them in exchange.ts (one request) and watch-stream.ts (one watch).
import { Backoff } from '../backoff.ts';
import { type Clock, systemClock } from '../clock.ts';
import { ApiError, refusedAtConnect, retryDelay } from './api-error.ts';
import type { KubeAuth } from './auth.ts';
import { type Connection, exchange } from './exchange.ts';
import { type KubeTarget, targetAuth } from './in-cluster.ts';
import {
  apiUrl,
  PATCH_CONTENT_TYPE,
  type PatchType,
  type RequestOptions,
  servedFromCache,
  type WatchEvent,
  type WatchOptions,
} from './request.ts';
import { streamWatch } from './watch-stream.ts';

/** A keep-alive agent's idle sockets (node:https Agent), to drop them for new connections. */
interface PooledAgent {
  freeSockets?: Record<string, { destroy(): void }[] | undefined>;
}

/**
 * hedgeAfterMs for the small reads and writes a handover waits on: a Node GET or merge patch, a
 * list of a few MetalLB objects take milliseconds on a healthy API server; past this, the
 * connection may be on one whose etcd member is gone, and a copy goes out on a new one.
 */
export const HEDGE_AFTER_MS = 750;

/** A connection refused at connect is dialled again at once this many times (KubeClient.once). */
export const REDIAL_REFUSED = 2;

/** `send` again at once while it is refused at connect, REDIAL_REFUSED times at most; `last` on the final try. */
async function redialRefused<T>(send: (last: boolean) => Promise<T>, signal?: AbortSignal): Promise<T> {
  for (let redial = 0; ; redial++) {
    const last = redial >= REDIAL_REFUSED;
    try {
      return await send(last);
    } catch (e) {
      if (last || !refusedAtConnect(e) || signal?.aborted) throw e;
    }
  }
}

/** Re-opening every watch on new connections at most this often (a failing write or read asks it). */
export const REOPEN_WATCHES_MS = 5_000;

export interface KubeClientOptions {
  clock?: Clock;
  /**
   * The client's lifetime (the sidecar aborts it when the grace period after SIGTERM is spent):
   * once aborted, requests and watches in flight end, none is retried or started (ApiError reason
   * `Aborted`), and none counts in onResult — abandoning a request says nothing about the API.
   */
  signal?: AbortSignal;
  /** Called after every request with its outcome; the sidecar counts API health from it. */
  onResult?: (ok: boolean, err?: ApiError) => void;
  userAgent?: string;
  /** The local address every connection is made from (an API server asked over loopback). */
  localAddress?: string;
}

/**
 * The one way drainguard talks to the API server: JSON over HTTPS with timeouts, typed
 * errors, optional retries with backoff, and streaming watches.
 */
export class KubeClient {
  readonly server: string;
  private readonly auth: KubeAuth;
  private readonly clock: Clock;
  private readonly onResult: ((ok: boolean, err?: ApiError) => void) | undefined;
  private readonly userAgent: string;
  private readonly lifetime: AbortSignal | undefined;
  private readonly localAddress: string | undefined;
  /** Each open watch's way to end itself so that its informer re-opens it at once. */
  private readonly openWatches = new Set<(why: string) => void>();
  private lastAgent: PooledAgent | undefined;
  private lastReopen = Number.NEGATIVE_INFINITY;

  /** A KubeTarget (fixed credentials: in-cluster, the lab) or a KubeAuth (kubeconfig.ts). */
  constructor(access: KubeTarget | KubeAuth, opts: KubeClientOptions = {}) {
    this.auth = 'apply' in access ? access : targetAuth(access);
    this.server = this.auth.server;
    this.clock = opts.clock ?? systemClock;
    this.onResult = opts.onResult;
    this.userAgent = opts.userAgent ?? 'drainguard';
    this.lifetime = opts.signal;
    this.localAddress = opts.localAddress;
  }

  /** The request's own signal joined with the client's lifetime. */
  private joined(signal: AbortSignal | undefined): AbortSignal | undefined {
    if (!this.lifetime) return signal;
    return signal ? AbortSignal.any([signal, this.lifetime]) : this.lifetime;
  }

  private abandoned(method: string, path: string): ApiError {
    return new ApiError(
      method,
      path,
      0,
      'Aborted',
      'the client is stopping (grace period spent): request abandoned',
    );
  }

  close(): void {
    this.auth.close();
  }

  /**
   * A client for one API server by its own address (not the `kubernetes` Service), with the same
   * credentials and CA: to ask that server alone (sidecar/api-fence/core.ts), from `localAddress`
   * when given. Its outcomes do not count as the API's health (no onResult), and closing it
   * leaves this client's connections.
   */
  at(server: string, opts: { userAgent?: string; localAddress?: string } = {}): KubeClient {
    const auth = this.auth;
    return new KubeClient(
      {
        server,
        ...(auth.describe ? { describe: auth.describe } : {}),
        apply: () => auth.apply(),
        close: () => {},
      },
      {
        clock: this.clock,
        userAgent: opts.userAgent ?? this.userAgent,
        ...(opts.localAddress ? { localAddress: opts.localAddress } : {}),
        ...(this.lifetime ? { signal: this.lifetime } : {}),
      },
    );
  }

  /** Agent and headers for one request; credential failures (e.g. an exec plugin's) are plain Errors. */
  private async connection(contentType?: string): Promise<Connection> {
    const { agent, headers } = await this.auth.apply();
    this.lastAgent = agent as PooledAgent | undefined;
    const h: Record<string, string> = {
      ...headers,
      accept: 'application/json',
      'user-agent': this.userAgent,
    };
    if (contentType) h['content-type'] = contentType;
    return { agent, headers: h };
  }

  /** A 401 names whose credentials were refused: with several kubeconfigs around, that is the question. */
  private apiError(sent: Record<string, string>, e: ApiError): ApiError {
    // The next request (a watch is retried by its informer) then gets fresh credentials.
    if (e.code !== 401) return e;
    this.auth.refresh?.(sent);
    if (!this.auth.describe) return e;
    const who = ` (credentials of ${this.auth.describe})`;
    return new ApiError(e.method, e.path, e.code, e.reason, `${e.detail}${who}`, e.retryAfterMs);
  }

  private url(path: string, query?: RequestOptions['query']): URL {
    return apiUrl(this.server, path, query);
  }

  async request<T = unknown>(path: string, given: RequestOptions = {}): Promise<T> {
    const signal = this.joined(given.signal);
    const opts: RequestOptions = signal ? { ...given, signal } : given;
    const backoff = new Backoff({ baseMs: 200, capMs: 5_000 });
    let refreshed = false;
    for (let attempt = 0; ; attempt++) {
      if (this.lifetime?.aborted) throw this.abandoned(opts.method ?? 'GET', path);
      try {
        const result = await this.attempt<T>(path, opts);
        if (!servedFromCache(opts)) this.onResult?.(true);
        return result;
      } catch (e) {
        // Not an answer from the API server (credentials could not be obtained): nothing to retry.
        if (!(e instanceof ApiError)) throw e;
        if (this.lifetime?.aborted) throw this.abandoned(e.method, path);
        // Abandoned by its caller: says nothing about the API either.
        if (given.signal?.aborted)
          throw new ApiError(e.method, path, 0, 'Aborted', 'request abandoned by its caller');
        const err = e;
        // A credential revoked before its expiry: one more try with a fresh one, as client-go does.
        if (err.code === 401 && this.auth.refresh && !refreshed) {
          refreshed = true;
          attempt--;
          continue;
        }
        this.onResult?.(false, err);
        // Timed out or failing (not 429: a live server shedding load): maybe a stale API server.
        if ((err.code === 0 || err.code >= 500) && !servedFromCache(opts))
          this.reopenWatches(`${err.method} ${path} failed (${err.code || err.reason})`);
        if (!err.retryable || attempt >= (opts.retries ?? 0) || opts.signal?.aborted) throw err;
        await this.clock.sleep(retryDelay(err, backoff.next()), opts.signal);
      }
    }
  }

  /** One attempt: once, or hedged (RequestOptions.hedgeAfterMs). */
  private attempt<T>(path: string, opts: RequestOptions): Promise<T> {
    const after = opts.hedgeAfterMs;
    if (after === undefined) return this.once<T>(path, opts);
    const first = new AbortController();
    const second = new AbortController();
    const hedgeTimer = new AbortController();
    /** The copy whose body streams to onText; the other's outcome no longer counts. */
    let streaming: AbortController | undefined;
    const mine = (own: AbortController) => streaming === undefined || streaming === own;
    const withSignal = (own: AbortController, other: AbortController): RequestOptions => {
      const { onText } = opts;
      return {
        ...opts,
        signal: opts.signal ? AbortSignal.any([opts.signal, own.signal]) : own.signal,
        ...(onText
          ? {
              onText: (chunk: string) => {
                if (streaming === undefined) {
                  // The first byte: this copy's server answers. No copy now; the other is dropped.
                  streaming = own;
                  hedging = false;
                  hedgeTimer.abort();
                  other.abort();
                }
                if (streaming === own) onText(chunk);
              },
            }
          : {}),
      };
    };
    let settled = false;
    /** True until the copy goes out; once it is out, a failure of the first is left to it. */
    let hedging = true;
    return new Promise<T>((resolve, reject) => {
      const win = (value: T, loser: AbortController) => {
        if (settled) return;
        settled = true;
        hedgeTimer.abort();
        loser.abort();
        resolve(value);
      };
      const fail = (e: unknown, other: AbortController) => {
        if (settled) return;
        settled = true;
        hedgeTimer.abort();
        other.abort();
        reject(e);
      };
      this.once<T>(path, withSignal(first, second)).then(
        (v) => {
          if (mine(first)) win(v, second);
        },
        (e: unknown) => {
          // Failed before the copy went out: no copy, the caller's retries decide. Once the copy
          // is out, it decides — unless this one's body was already streaming.
          if (streaming === first) return fail(e, second);
          if (!hedging || streaming !== undefined) return;
          hedging = false;
          fail(e, second);
        },
      );
      this.clock.sleep(after, hedgeTimer.signal).then(
        () => {
          if (settled || !hedging) return;
          hedging = false;
          // A new connection: the first copy holds its socket; idle ones may reach the same server.
          this.dropIdleSockets();
          this.once<T>(path, { ...withSignal(second, first), fresh: true }).then(
            (v) => {
              if (!mine(second)) return;
              if (!settled)
                this.reopenWatches(
                  `${opts.method ?? 'GET'} ${path} answered on a new connection after ${after} ms without an answer`,
                );
              win(v, first);
            },
            // The copy failed (an answer, or its own timeout) while the first still hangs: the
            // attempt fails now, so the caller's retry goes out instead of waiting for the first
            // to time out (an etcd leader election fails the copy at once; the first may sit on
            // a server whose etcd member is gone).
            (e: unknown) => {
              if (mine(second)) fail(e, first);
            },
          );
        },
        () => {},
      );
    });
  }

  private dropIdleSockets(): void {
    for (const sockets of Object.values(this.lastAgent?.freeSockets ?? {}))
      for (const s of sockets ?? []) s.destroy();
  }

  /**
   * One request, dialled again at once (up to REDIAL_REFUSED times) when the connection is refused:
   * nothing reached a server, so any method may go again, and behind the `kubernetes` Service a
   * new connection lands on another API server. A stale one fenced on a control-plane node
   * refuses every connection but from loopback (sidecar/api-fence/guard.ts); with three servers a third of
   * new connections land on it, and a backoff on each cost a handover ~0.9 s (ha-seed, issue 23).
   */
  private async once<T>(path: string, opts: RequestOptions & { fresh?: boolean }): Promise<T> {
    return redialRefused(() => this.sendOnce<T>(path, opts), opts.signal);
  }

  private async sendOnce<T>(path: string, opts: RequestOptions & { fresh?: boolean }): Promise<T> {
    const method = opts.method ?? 'GET';
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const url = this.url(path, opts.query);
    const conn = await this.connection(
      body === undefined ? undefined : (opts.contentType ?? 'application/json'),
    );
    return exchange<T>({ url, method, body, conn, localAddress: this.localAddress }, opts, (e) =>
      this.apiError(conn.headers, e),
    );
  }

  get<T>(path: string, opts: Omit<RequestOptions, 'method' | 'body'> = {}): Promise<T> {
    return this.request<T>(path, opts);
  }
  create<T>(path: string, body: unknown, opts: Omit<RequestOptions, 'method' | 'body'> = {}): Promise<T> {
    return this.request<T>(path, { ...opts, method: 'POST', body });
  }
  replace<T>(path: string, body: unknown, opts: Omit<RequestOptions, 'method' | 'body'> = {}): Promise<T> {
    return this.request<T>(path, { ...opts, method: 'PUT', body });
  }
  patch<T>(
    path: string,
    body: unknown,
    type: PatchType,
    opts: Omit<RequestOptions, 'method' | 'body'> = {},
  ): Promise<T> {
    return this.request<T>(path, { ...opts, method: 'PATCH', body, contentType: PATCH_CONTENT_TYPE[type] });
  }
  delete<T>(path: string, opts: Omit<RequestOptions, 'method'> = {}): Promise<T> {
    return this.request<T>(path, { ...opts, method: 'DELETE' });
  }

  /**
   * One watch stream: calls onEvent per event until the server ends it, the signal aborts,
   * or an error occurs (rejects with ApiError; an ERROR event with 410 becomes ApiError 410;
   * WatchIdle after the idle limit). Bookmarks are always asked for: they keep a quiet watch's
   * resourceVersion fresh, so it can be re-opened where it was after the watch cache moved on.
   */
  async watch<T>(
    path: string,
    query: Record<string, string | number | boolean | undefined>,
    onEvent: (ev: WatchEvent<T>) => void,
    signal: AbortSignal,
    opts: WatchOptions = {},
  ): Promise<void> {
    // A watch refused at connect is dialled again at once too (once(): another API server).
    return redialRefused((last) => this.watchOnce(path, query, onEvent, signal, opts, last), signal);
  }

  /** One watch stream (watch()); a refusal at connect counts in onResult only if `reportRefused`. */
  private async watchOnce<T>(
    path: string,
    query: Record<string, string | number | boolean | undefined>,
    onEvent: (ev: WatchEvent<T>) => void,
    signal: AbortSignal,
    opts: WatchOptions,
    reportRefused: boolean,
  ): Promise<void> {
    if (this.lifetime?.aborted) return;
    signal = this.joined(signal) ?? signal;
    const url = this.url(path, { ...query, watch: 1, allowWatchBookmarks: true });
    const conn = await this.connection();
    return streamWatch(url, conn, onEvent, signal, opts, reportRefused, {
      apiError: (e) => this.apiError(conn.headers, e),
      onResult: this.onResult,
      openWatches: this.openWatches,
    });
  }

  /**
   * Ends every open watch so that its informer re-opens it at once from its resourceVersion, on a
   * new connection (idle pooled sockets are dropped too). Asked when a write or consistent read
   * failed as if the API were down: behind the `kubernetes` Service each connection lands on one
   * API server, and one whose etcd member is gone keeps its watches open and silent for good; a new
   * connection may reach a healthy one. At most once per REOPEN_WATCHES_MS.
   */
  reopenWatches(why: string): void {
    const now = this.clock.now();
    if (now - this.lastReopen < REOPEN_WATCHES_MS) return;
    this.lastReopen = now;
    this.dropIdleSockets();
    const reason = `${why}: watch re-opened on a new connection (the API server it was open on may be stale)`;
    for (const end of [...this.openWatches]) end(reason);
  }
}
