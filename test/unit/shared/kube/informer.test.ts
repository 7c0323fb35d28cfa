// Which watch failures re-list and which re-watch, and the Informer's loop against a scripted API:
// the requests it makes (list from the watch cache, watches from the last resourceVersion).
import pino from 'pino';
import t from 'tap';
import { waitFor } from '../../../../shared/clock.ts';
import { ApiError, WatchIdle } from '../../../../shared/kube/api-error.ts';
import type { KubeClient } from '../../../../shared/kube/client.ts';
import { Informer, recoveryAfter, watchTimeoutSeconds } from '../../../../shared/kube/informer.ts';
import type { WatchOptions } from '../../../../shared/kube/request.ts';

t.test('only a resourceVersion the server no longer has re-lists', async (t) => {
  const watchError = (code: number, reason: string, message = '') =>
    new ApiError('WATCH', '/api/v1/nodes', code, reason, message);
  t.equal(recoveryAfter(watchError(410, 'Expired', 'too old resource version: 5 (90)')), 'relist');
  t.equal(recoveryAfter(watchError(410, 'Gone', 'watch refused')), 'relist', '410 as the HTTP status');
  t.equal(
    recoveryAfter(watchError(504, 'Timeout', 'Too large resource version: 90, current: 5')),
    'relist',
    'a version from the future: re-watching cannot get past it',
  );
  for (const [code, reason] of [
    [0, 'TransportError'],
    [500, 'InternalError'],
    [503, 'ServiceUnavailable'],
    [429, 'TooManyRequests'],
    [403, 'Forbidden'],
    [401, 'Unauthorized'],
    [0, 'BadResponse'],
  ] as const)
    t.equal(recoveryAfter(watchError(code, reason)), 'rewatch', `${code} ${reason} re-watches`);
  t.equal(recoveryAfter(new Error('exec plugin failed')), 'rewatch', 'credentials not obtained');
  t.equal(recoveryAfter(new WatchIdle(110_000)), 'reopen', 'silence is no failure');
});

t.test('watch timeouts are 5 to 10 minutes, spread', async (t) => {
  t.equal(
    watchTimeoutSeconds(() => 0),
    300,
  );
  t.equal(
    watchTimeoutSeconds(() => 0.5),
    450,
  );
  t.equal(
    watchTimeoutSeconds(() => 0.999_999),
    599,
  );
});

type OnEvent = (ev: { type: string; object: object }) => void;
/** One watch: `open` is the server accepting it (200). */
type Step = (onEvent: OnEvent, signal: AbortSignal, open: () => void) => Promise<void>;
/** A watch the server accepts at once, then runs `f`. */
const accepted =
  (f: (onEvent: OnEvent, signal: AbortSignal) => Promise<void>): Step =>
  (on, signal, open) => {
    open();
    return f(on, signal);
  };
const node = (rv: string, label = '') => ({
  metadata: { name: 'n1', resourceVersion: rv, labels: { l: label } },
});
const bookmark = (rv: string) => ({ type: 'BOOKMARK', object: { metadata: { resourceVersion: rv } } });
/** Stays open until the informer stops. */
const hang = accepted(
  (_on, signal) =>
    new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true })),
);

/** Lists answer with the next list; each watch runs the next step. Records every request. */
function scriptedApi(lists: { rv: string; items: object[] }[], watches: Step[]) {
  const requests: string[] = [];
  const client = {
    get: async (path: string, opts: { query?: Record<string, unknown> }) => {
      requests.push(`LIST ${path} resourceVersion=${opts.query?.resourceVersion}`);
      const l = lists.shift();
      if (!l) throw new Error('no more lists scripted');
      return { metadata: { resourceVersion: l.rv }, items: l.items };
    },
    watch: async (
      _path: string,
      query: Record<string, unknown>,
      onEvent: (ev: { type: string; object: object }) => void,
      signal: AbortSignal,
      opts: WatchOptions = {},
    ) => {
      requests.push(`WATCH from ${query.resourceVersion}`);
      await (watches.shift() ?? hang)(onEvent, signal, () => opts.onOpen?.());
    },
  } as unknown as KubeClient;
  return { client, requests };
}

/** Backoffs pass at once: the scripted API is all the test waits on. */
const instantClock = () => ({ now: () => 0, sleep: async () => {} });

t.test('the informer re-watches from its last version after errors and ends; a 410 re-lists', async (t) => {
  const api = scriptedApi(
    [
      { rv: '5', items: [node('5')] },
      { rv: '40', items: [node('33', 'after 410')] },
    ],
    [
      // A quiet watch: a bookmark moves it on, then the connection drops.
      accepted(async (on) => {
        on(bookmark('9'));
        throw new ApiError('WATCH', '/api/v1/nodes', 0, 'TransportError', 'socket hang up');
      }),
      // A change, then the server ends the watch (its timeoutSeconds).
      accepted(async (on) => on({ type: 'MODIFIED', object: node('12', 'changed') })),
      // The server errs in the stream.
      accepted(async () => {
        throw new ApiError('WATCH', '/api/v1/nodes', 500, 'InternalError', 'etcd leader changed');
      }),
      // Too old: the only way back is a list.
      accepted(async () => {
        throw new ApiError('WATCH', '/api/v1/nodes', 410, 'Expired', 'too old resource version: 12 (30)');
      }),
    ],
  );
  const seen: string[] = [];
  const informer = new Informer(api.client, {
    path: '/api/v1/nodes',
    log: pino({ level: 'silent' }),
    clock: instantClock(),
    onChange: (objs, ev) => {
      const n = objs.values().next().value as ReturnType<typeof node> | undefined;
      seen.push(`${ev.type} ${n?.metadata.labels.l ?? ''}`.trim());
    },
  });
  informer.start();
  try {
    await waitFor('the second list and its watch', () => api.requests.length >= 7, { timeoutMs: 5_000 });
    t.strictSame(api.requests, [
      'LIST /api/v1/nodes resourceVersion=0',
      'WATCH from 5',
      'WATCH from 9',
      'WATCH from 12',
      'WATCH from 12',
      'LIST /api/v1/nodes resourceVersion=0',
      'WATCH from 40',
    ]);
    t.strictSame(seen, ['SYNC', 'RESUMED', 'MODIFIED changed', 'RESUMED changed', 'SYNC after 410']);
    t.strictSame(informer.stats, { lists: 2, watches: 5, gone: 1, bookmarks: 1, idleReopens: 0 });
    t.equal(informer.restarts, 3, 'three failures: the drop, the 500, the 410');
    t.ok(informer.current, 'current again once a watch resumed');
  } finally {
    await informer.stop();
  }
});

t.test('a failed watch leaves the view not current until the next watch is accepted', async (t) => {
  let accept: (() => void) | undefined;
  const api = scriptedApi(
    [{ rv: '5', items: [node('5')] }],
    [
      accepted(async () => {
        throw new ApiError('WATCH', '/api/v1/nodes', 503, 'ServiceUnavailable', 'shutting down');
      }),
      // The re-watch is accepted when the test says so.
      (_on, signal, open) =>
        new Promise<void>((resolve) => {
          accept = open;
          signal.addEventListener('abort', () => resolve(), { once: true });
        }),
    ],
  );
  const informer = new Informer(api.client, {
    path: '/api/v1/nodes',
    log: pino({ level: 'silent' }),
    clock: instantClock(),
    onChange: () => {},
  });
  informer.start();
  try {
    await waitFor('the re-watch is asked for', () => accept !== undefined, { timeoutMs: 5_000 });
    t.notOk(informer.current, 'not current while the watch is down');
    t.match(informer.lastError?.message, /503/);
    accept?.();
    t.ok(informer.current, 'current once the server accepted the watch from the last version');
    t.strictSame(api.requests, ['LIST /api/v1/nodes resourceVersion=0', 'WATCH from 5', 'WATCH from 5']);
  } finally {
    await informer.stop();
  }
});
