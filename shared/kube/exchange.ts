// One HTTP exchange with the API server, the wire under each attempt of KubeClient.request: the
// JSON body out, the answer back (JSON, text or streamed), a non-2xx one as an ApiError from its
// Status body and Retry-After.
import type { Agent } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { nodeHttp } from '../node-http.ts';
import { ApiError, parseApiStatusBody, parseRetryAfter } from './api-error.ts';
import type { RequestOptions } from './request.ts';

// A kubeconfig may name a plain-http server (with insecure-skip-tls-verify); kubectl allows it.
export const send = (url: URL) => (url.protocol === 'http:' ? nodeHttp.request : httpsRequest);

/** The agent and headers (credentials included) one request or watch is sent with. */
export interface Connection {
  agent: Agent;
  headers: Record<string, string>;
}

/** One request as it goes out: where, its method and JSON text, and how it connects. */
export interface Outgoing {
  url: URL;
  method: string;
  body: string | undefined;
  conn: Connection;
  /** The local address the connection is made from (KubeClientOptions.localAddress). */
  localAddress: string | undefined;
}

/**
 * Sends one request and reads its answer; `apiError` is what a non-2xx answer's ApiError becomes
 * (KubeClient names whose credentials a 401 refused).
 */
export function exchange<T>(
  out: Outgoing,
  opts: RequestOptions & { fresh?: boolean },
  apiError: (e: ApiError) => ApiError,
): Promise<T> {
  const { url, method, body, conn, localAddress } = out;
  return new Promise<T>((resolve, reject) => {
    const req = send(url)(
      url,
      {
        method,
        agent: conn.agent,
        headers: {
          ...conn.headers,
          ...(opts.fresh ? { connection: 'close' } : {}),
          // Node sends a DELETE body unframed unless its length is given; the server then sees garbage.
          ...(body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) }),
        },
        timeout: opts.timeoutMs ?? 10_000,
        ...(opts.signal ? { signal: opts.signal } : {}),
        ...(localAddress ? { localAddress: localAddress } : {}),
      },
      (res) => {
        const code0 = res.statusCode ?? 0;
        const { onText } = opts;
        if (onText && code0 >= 200 && code0 < 300) {
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            try {
              onText(c);
            } catch (e) {
              req.destroy();
              reject(new ApiError(method, url.pathname, code0, 'BadResponse', (e as Error).message));
            }
          });
          res.on('error', (e) => reject(new ApiError(method, url.pathname, 0, 'TransportError', e.message)));
          res.on('end', () => resolve(undefined as T));
          return;
        }
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (e) => reject(new ApiError(method, url.pathname, 0, 'TransportError', e.message)));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const code = res.statusCode ?? 0;
          if (code >= 200 && code < 300) {
            try {
              resolve((opts.text ? text : text ? JSON.parse(text) : {}) as T);
            } catch (e) {
              reject(new ApiError(method, url.pathname, code, 'BadResponse', (e as Error).message));
            }
            return;
          }
          const status = parseApiStatusBody(text);
          const reason = status.reason ?? res.statusMessage ?? 'Error';
          const message = status.message ?? text.slice(0, 500);
          reject(
            apiError(
              new ApiError(
                method,
                url.pathname,
                code,
                reason,
                message,
                parseRetryAfter(res.headers['retry-after']),
              ),
            ),
          );
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`timed out after ${opts.timeoutMs ?? 10_000} ms`)));
    req.on('error', (e) => reject(new ApiError(method, url.pathname, 0, 'TransportError', e.message)));
    if (body !== undefined) req.write(body);
    req.end();
  });
}
