// An API server whose etcd member is gone (issue 23) still answers reads from its watch cache at
// once, with old data, and opens watches that stay silent, while consistent reads and writes time
// out. So only consistent reads and writes tell "the API is up"; a cached answer must not clear
// the "API down" that the failed writes set (the L2 fail-safe counts its grace from it).
import t from 'tap';
import { fakeApiServer } from '../../../../lab/fake/api-server.ts';
import { waitFor } from '../../../../shared/clock.ts';
import { WatchIdle } from '../../../../shared/kube/api-error.ts';
import { type KubeClientOptions, REOPEN_WATCHES_MS } from '../../../../shared/kube/client.ts';
import { listPaged } from '../../../../shared/kube/paged-list.ts';
import { servedFromCache } from '../../../../shared/kube/request.ts';

/**
 * A stale API server behind the first connection (it never answers) and a healthy one behind every
 * later one (it answers `body`); the client's source port of each request, in order.
 */
async function staleFirstConnection(body: string, opts: KubeClientOptions = {}) {
  const sockets: number[] = [];
  let stale: number | undefined;
  const client = await fakeApiServer(
    (req, res) => {
      const port = req.socket.remotePort ?? 0;
      sockets.push(port);
      stale ??= port;
      if (port === stale) return; // never answers
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    },
    { keepAlive: true, ...opts },
  );
  return { client, sockets };
}

t.test('servedFromCache: GETs with resourceVersion=0 only', async (t) => {
  t.ok(servedFromCache({ query: { resourceVersion: '0' } }));
  t.ok(servedFromCache({ method: 'GET', query: { resourceVersion: 0 } }));
  t.notOk(servedFromCache({}), 'a consistent read');
  t.notOk(
    servedFromCache({ query: { resourceVersion: '12' } }),
    'a read at a version is not a cache hint here',
  );
  t.notOk(servedFromCache({ method: 'PATCH', query: { resourceVersion: '0' } }), 'a write');
});

t.test(
  'a stale server: cached lists and watch opens report nothing; consistent reads report up',
  async (t) => {
    const results: boolean[] = [];
    const client = await fakeApiServer(
      (req, res) => {
        const url = new URL(req.url ?? '/', 'http://x');
        if (url.searchParams.get('watch') === '1') {
          // Open and silent, as a stale server's watch is.
          res.writeHead(200, { 'content-type': 'application/json' });
          res.flushHeaders();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ metadata: { resourceVersion: '5' }, items: [] }));
      },
      { onResult: (ok) => results.push(ok) },
    );
    await client.get('/api/v1/nodes', { query: { resourceVersion: '0', fieldSelector: 'metadata.name=a' } });
    t.strictSame(results, [], 'a list from the watch cache proves nothing');
    const stop = new AbortController();
    let opened = false;
    const watching = client
      .watch('/api/v1/nodes', { resourceVersion: '5' }, () => {}, stop.signal, {
        onOpen: () => {
          opened = true;
        },
      })
      .catch(() => undefined);
    await waitFor('the watch open', () => opened, { timeoutMs: 5_000 });
    t.strictSame(results, [], 'an open (silent) watch proves nothing');
    stop.abort();
    await watching;
    await client.get('/api/v1/nodes/a');
    t.strictSame(results, [true], 'a consistent read does');
  },
);

t.test(
  'a consistent read that times out re-opens a silent watch on a new connection (not pinned to a stale server)',
  async (t) => {
    // A stale API server behind the `kubernetes` Service: its watches stay open and silent, its
    // consistent reads never answer. Each new connection may land on a healthy server instead.
    const watchSockets: number[] = [];
    let now = 0;
    const clock = { now: () => now, sleep: async () => {} };
    const client = await fakeApiServer(
      (req, res) => {
        const url = new URL(req.url ?? '/', 'http://x');
        if (url.searchParams.get('watch') === '1') {
          watchSockets.push(req.socket.remotePort ?? 0);
          res.writeHead(200, { 'content-type': 'application/json' });
          res.flushHeaders();
          return;
        }
        // A consistent read: no answer (the client's timeout ends it).
      },
      { clock: clock as never, keepAlive: true },
    );
    const stop = new AbortController();
    t.teardown(() => stop.abort());
    let opened = 0;
    const watchOnce = () =>
      client
        .watch('/api/v1/nodes', { resourceVersion: '5' }, () => {}, stop.signal, {
          onOpen: () => {
            opened++;
          },
        })
        .then(
          () => 'ended',
          (e: unknown) => e,
        );
    const first = watchOnce();
    await waitFor('the watch open', () => opened === 1, { timeoutMs: 5_000 });
    await t.rejects(client.get('/api/v1/nodes/a', { timeoutMs: 200 }), /timed out/);
    const ended = await first;
    t.ok(ended instanceof WatchIdle, 'the silent watch ended as "re-open", not as an API failure');
    t.match((ended as Error).message, /GET \/api\/v1\/nodes\/a failed .*re-opened on a new connection/);
    const second = watchOnce();
    await waitFor('the watch open again', () => opened === 2, { timeoutMs: 5_000 });
    t.equal(watchSockets.length, 2);
    t.not(watchSockets[1], watchSockets[0], 'on another connection');
    // Another failure at once does not end it again: at most once per REOPEN_WATCHES_MS.
    await t.rejects(client.get('/api/v1/nodes/a', { timeoutMs: 200 }), /timed out/);
    now += REOPEN_WATCHES_MS;
    await t.rejects(client.get('/api/v1/nodes/a', { timeoutMs: 200 }), /timed out/);
    t.ok((await second) instanceof WatchIdle, 'ended again after REOPEN_WATCHES_MS');
  },
);

t.test(
  'a watch that ends normally is re-opened on a new connection (its socket is not kept alive)',
  async (t) => {
    const watchSockets: number[] = [];
    const client = await fakeApiServer(
      (req, res) => {
        watchSockets.push(req.socket.remotePort ?? 0);
        // The server's timeoutSeconds ran out: an empty, ended stream.
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end();
      },
      { keepAlive: true },
    );
    const stop = new AbortController();
    await client.watch('/api/v1/nodes', { resourceVersion: '5' }, () => {}, stop.signal);
    await client.watch('/api/v1/nodes', { resourceVersion: '5' }, () => {}, stop.signal);
    t.equal(watchSockets.length, 2);
    t.not(watchSockets[1], watchSockets[0], 'each watch on its own connection');
  },
);

t.test(
  'a hedged read: the copy sent on a new connection after hedgeAfterMs answers while the first hangs on a stale server',
  async (t) => {
    // The first connection reaches a server whose etcd member is gone: the consistent read hangs.
    // Any later connection reaches a healthy one.
    const results: boolean[] = [];
    const { client, sockets } = await staleFirstConnection(
      JSON.stringify({ metadata: { name: 'a', resourceVersion: '9' } }),
      { onResult: (ok) => results.push(ok) },
    );
    const started = Date.now();
    const node = await client.get<{ metadata: { resourceVersion: string } }>('/api/v1/nodes/a', {
      timeoutMs: 10_000,
      hedgeAfterMs: 100,
    });
    t.equal(node.metadata.resourceVersion, '9', 'the healthy server answered');
    t.ok(Date.now() - started < 5_000, 'well before the first copy would time out');
    t.equal(sockets.length, 2);
    t.not(sockets[1], sockets[0], 'the copy on a new connection');
    t.strictSame(results, [true], 'one answer counted: the abandoned copy is no API failure');
    // Not hedged: a request that fails fast is not copied (the caller's retries decide).
    let hits = 0;
    const failing = await fakeApiServer(
      (_req, res) => {
        hits++;
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end('{"kind":"Status","reason":"InternalError","message":"boom"}');
      },
      { keepAlive: true },
    );
    await t.rejects(failing.get('/api/v1/nodes/a', { hedgeAfterMs: 300 }), /500 InternalError/);
    t.equal(hits, 1, 'a fast failure is not sent again');
  },
);

t.test(
  "a hedged read whose copy fails while the first still hangs fails then, not at the first's timeout (the retry goes out sooner)",
  async (t) => {
    // The first connection sits on a stale server; the copy meets an etcd leader election.
    let stale: number | undefined;
    const client = await fakeApiServer(
      (req, res) => {
        const port = req.socket.remotePort ?? 0;
        stale ??= port;
        if (port === stale) return; // never answers
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end('{"kind":"Status","reason":"InternalError","message":"etcdserver: leader changed"}');
      },
      { keepAlive: true },
    );
    const started = Date.now();
    await t.rejects(
      client.get('/api/v1/nodes/a', { timeoutMs: 10_000, hedgeAfterMs: 100 }),
      /leader changed/,
      "the copy's answer",
    );
    t.ok(Date.now() - started < 5_000, `failed ${Date.now() - started} ms in, not at the 10 s timeout`);
  },
);

t.test(
  'a hedged streamed read (a page of a wide list): the copy goes out while no byte came, and only one body reaches onText',
  async (t) => {
    // The first connection sits on a stale server: the consistent list never starts answering.
    const page = JSON.stringify({
      metadata: { resourceVersion: '9' },
      items: [{ metadata: { name: 'a' } }, { metadata: { name: 'b' } }],
    });
    const { client, sockets } = await staleFirstConnection(page);
    const started = Date.now();
    const listed = await listPaged(client, '/api/v1/nodes', {
      pageSize: 250,
      timeoutMs: 10_000,
      hedgeAfterMs: 100,
    });
    t.strictSame(
      listed.items.map((o) => o.metadata?.name),
      ['a', 'b'],
      'the healthy copy streamed, once',
    );
    t.ok(Date.now() - started < 5_000, 'well before the first copy would time out');
    t.equal(sockets.length, 2);
    t.not(sockets[1], sockets[0], 'the copy on a new connection');

    // A body that starts before hedgeAfterMs is read on, however slowly it comes: no copy.
    let hits = 0;
    const slow = await fakeApiServer(
      (_req, res) => {
        hits++;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(page.slice(0, 40));
        setTimeout(() => res.end(page.slice(40)), 400);
      },
      { keepAlive: true },
    );
    const chunks: string[] = [];
    await slow.get('/api/v1/nodes', { hedgeAfterMs: 100, onText: (c) => chunks.push(c) });
    t.equal(chunks.join(''), page, 'the one body, whole');
    t.equal(hits, 1, 'a body that started is not asked again');
  },
);

t.test('a hedged streamed read whose first copy starts answering late: the copy is dropped', async (t) => {
  // Both copies answer; the first starts after the copy went out but before the copy answers.
  // Exactly one body reaches onText, never a mix of two.
  let n = 0;
  const body = (name: string) =>
    JSON.stringify({ metadata: { resourceVersion: '9' }, items: [{ metadata: { name } }] });
  const client = await fakeApiServer(
    (_req, res) => {
      const mine = ++n;
      setTimeout(
        () => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(body(mine === 1 ? 'first' : 'copy'));
        },
        mine === 1 ? 250 : 1_500,
      );
    },
    { keepAlive: true },
  );
  const chunks: string[] = [];
  await client.get('/api/v1/nodes', { hedgeAfterMs: 100, timeoutMs: 5_000, onText: (c) => chunks.push(c) });
  t.equal(n, 2, 'the copy went out');
  t.equal(chunks.join(''), body('first'), "the first copy's body only");
});
