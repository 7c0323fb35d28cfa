// What an API server answers once its etcd member is gone (issue 23): asked the questions a client
// asks — readiness, a list from the watch cache (resourceVersion=0, what informers start with), a
// consistent list, a write, and whether a watch opened before still stands and still delivers —
// next to what a healthy member of the same cluster answers. Used by the HA lab's test and the
// seed benchmark; the findings are in docs/lab-cluster.md.
import { ApiError } from '../../shared/kube/api-error.ts';
import type { KubeClient } from '../../shared/kube/client.ts';

export interface Answer {
  /** 'ok' (2xx), 'error' (an HTTP status), 'unreachable' (refused, reset) or 'timeout' (no answer in time). */
  outcome: 'ok' | 'error' | 'unreachable' | 'timeout';
  /** The HTTP status (0 without one). */
  code: number;
  ms: number;
  /** The server's message, or the transport error. */
  message: string;
}

/** One request, classified: never throws. */
export async function ask<T = unknown>(
  client: KubeClient,
  path: string,
  opts: {
    method?: string;
    body?: unknown;
    query?: Record<string, string>;
    text?: boolean;
    timeoutMs: number;
  },
): Promise<{ answer: Answer; body: T | undefined }> {
  const t0 = Date.now();
  try {
    const body = await client.request<T>(path, {
      ...(opts.method ? { method: opts.method } : {}),
      ...(opts.body === undefined ? {} : { body: opts.body }),
      ...(opts.query ? { query: opts.query } : {}),
      ...(opts.text ? { text: true } : {}),
      timeoutMs: opts.timeoutMs,
    });
    return { answer: { outcome: 'ok', code: 200, ms: Date.now() - t0, message: '' }, body };
  } catch (e) {
    const ms = Date.now() - t0;
    const err = e as Error;
    if (e instanceof ApiError && e.code !== 0)
      return {
        answer: { outcome: 'error', code: e.code, ms, message: e.detail.slice(0, 300) },
        body: undefined,
      };
    const timeout = /timed out/i.test(err.message);
    return {
      answer: {
        outcome: timeout ? 'timeout' : 'unreachable',
        code: 0,
        ms,
        message: err.message.slice(0, 300),
      },
      body: undefined,
    };
  }
}

/** A watch held open, counting what it delivers (ADDED/MODIFIED/DELETED by object name). */
export interface HeldWatch {
  /** Names of the objects its events were about, in order. */
  readonly names: string[];
  /** The server accepted it. */
  readonly open: boolean;
  /** It ended (server closed it, or an error), with why. */
  readonly ended: string | undefined;
  stop(): void;
}

export function holdWatch(client: KubeClient, path: string): HeldWatch {
  const ac = new AbortController();
  const names: string[] = [];
  let open = false;
  let ended: string | undefined;
  client
    .watch<{ metadata?: { name?: string } }>(
      path,
      { resourceVersion: '0' },
      (ev) => {
        if (ev.type !== 'BOOKMARK') names.push(ev.object.metadata?.name ?? '');
      },
      ac.signal,
      // Longer than any observation: a silent watch must be seen silent, not ended by us.
      { idleTimeoutMs: 600_000, onOpen: () => (open = true) },
    )
    .then(
      () => (ended ??= ac.signal.aborted ? undefined : 'closed by the server'),
      (e: Error) => (ended ??= e.message),
    );
  return {
    names,
    get open() {
      return open;
    },
    get ended() {
      return ended;
    },
    stop: () => ac.abort(),
  };
}
