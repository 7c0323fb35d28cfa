// One watch stream on a connection of its own (the wire under KubeClient.watch): events line by
// line, an ERROR event or a refusal as ApiError, silence or an end on purpose as WatchIdle.
import {
  ApiError,
  parseApiStatusBody,
  parseRetryAfter,
  refusedAtConnect,
  WATCH_IDLE_MS,
  WatchIdle,
} from './api-error.ts';
import { type Connection, send } from './exchange.ts';
import type { WatchEvent, WatchOptions } from './request.ts';

/** What a watch stream needs of its client. */
export interface WatchClient {
  /** What a refusal's ApiError becomes (KubeClient names whose credentials a 401 refused). */
  apiError(e: ApiError): ApiError;
  /** KubeClientOptions.onResult: a refusal or a stream cut counts as an API failure. */
  onResult: ((ok: boolean, err?: ApiError) => void) | undefined;
  /** The client's open watches: this one's way to end itself is in it while it is open (reopenWatches). */
  openWatches: Set<(why: string) => void>;
}

/**
 * Streams one watch from `url` until the server ends it, `signal` aborts, or an error occurs
 * (KubeClient.watch); a refusal at connect counts in onResult only if `reportRefused`.
 */
export function streamWatch<T>(
  url: URL,
  conn: Connection,
  onEvent: (ev: WatchEvent<T>) => void,
  signal: AbortSignal,
  opts: WatchOptions,
  reportRefused: boolean,
  client: WatchClient,
): Promise<void> {
  const { onOpen } = opts;
  const idleTimeoutMs = opts.idleTimeoutMs ?? WATCH_IDLE_MS;
  let end: ((why: string) => void) | undefined;
  return new Promise<void>((resolve, reject) => {
    // Set when the watch is ended on purpose (silence, or re-opened on a new connection).
    let reopened: WatchIdle | undefined;
    const req = send(url)(
      url,
      // Each watch on a connection of its own, closed when it ends: a re-opened watch (its 5–10
      // min timeout, silence) then lands on any API server behind the `kubernetes` Service, not
      // again on one whose etcd member is gone (it keeps watches open and silent for good).
      { method: 'GET', agent: conn.agent, headers: { ...conn.headers, connection: 'close' }, signal },
      (res) => {
        const code = res.statusCode ?? 0;
        if (code !== 200) {
          // The Status body says why (410 "too old resource version", 403, 429 ...).
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            if (text.length < 4096) text += c;
          });
          res.on('error', () => {});
          res.on('end', () => {
            const st = parseApiStatusBody(text);
            const err = client.apiError(
              new ApiError(
                'WATCH',
                url.pathname,
                code,
                st.reason ?? res.statusMessage ?? 'Error',
                st.message ?? 'watch refused',
                parseRetryAfter(res.headers['retry-after']),
              ),
            );
            // With its code: a refusal (403, 404) is an answer, not an outage.
            client.onResult?.(false, err);
            reject(err);
          });
          return;
        }
        // Not a sign the API is up: a watch is served from the watch cache, and an API server
        // whose etcd is gone still opens one and keeps it silent (servedFromCache).
        onOpen?.();
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buf += chunk;
          let nl = buf.indexOf('\n');
          while (nl >= 0) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            nl = buf.indexOf('\n');
            if (!line) continue;
            let ev: WatchEvent<T>;
            try {
              ev = JSON.parse(line) as WatchEvent<T>;
            } catch (e) {
              req.destroy();
              reject(new ApiError('WATCH', url.pathname, 0, 'BadResponse', (e as Error).message));
              return;
            }
            if (ev.type === 'ERROR') {
              const st = ev.object as { code?: number; reason?: string; message?: string };
              req.destroy();
              reject(
                new ApiError('WATCH', url.pathname, st.code ?? 500, st.reason ?? 'Error', st.message ?? ''),
              );
              return;
            }
            onEvent(ev);
          }
        });
        res.on('end', () => resolve());
        res.on('error', (e) => {
          if (signal.aborted) return resolve();
          if (reopened) return reject(reopened);
          // A stream cut mid-response (API server stopped, connection reset) is an API failure too.
          const err = new ApiError('WATCH', url.pathname, 0, 'TransportError', e.message);
          client.onResult?.(false, err);
          reject(err);
        });
      },
    );
    // A peer that vanishes without a FIN would leave the stream silent forever: the kernel's
    // keepalive probes the connection, and silence beyond the idle limit ends the watch (the
    // informer re-opens it from its resourceVersion; that is no API failure).
    req.on('socket', (sock) => sock.setKeepAlive(true, 15_000));
    req.setTimeout(idleTimeoutMs, () => {
      reopened = new WatchIdle(idleTimeoutMs);
      req.destroy(reopened);
    });
    end = (why) => {
      reopened ??= new WatchIdle(idleTimeoutMs, why);
      req.destroy(reopened);
    };
    client.openWatches.add(end);
    req.on('error', (e) => {
      if (signal.aborted) resolve();
      else if (reopened) reject(reopened);
      else {
        const err = new ApiError('WATCH', url.pathname, 0, 'TransportError', e.message);
        if (reportRefused || !refusedAtConnect(err)) client.onResult?.(false, err);
        reject(err);
      }
    });
    req.end();
  }).finally(() => {
    if (end) client.openWatches.delete(end);
  });
}
