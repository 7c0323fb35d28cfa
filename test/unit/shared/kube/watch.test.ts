import t from 'tap';
import { fakeApiServer } from '../../../../lab/fake/api-server.ts';
import { WATCH_IDLE_MS } from '../../../../shared/kube/api-error.ts';
import type { WatchEvent } from '../../../../shared/kube/request.ts';

t.test(
  'the idle limit is above the 1.20 bookmark period (60 s) and notices a dead stream within 2 min',
  async (t) => {
    t.ok(WATCH_IDLE_MS >= 90_000 && WATCH_IDLE_MS <= 120_000, `${WATCH_IDLE_MS} ms`);
  },
);

t.test('a watch asks for bookmarks, says when it is open, and delivers them', async (t) => {
  let asked: URLSearchParams | undefined;
  const client = await fakeApiServer((req, res) => {
    asked = new URL(req.url ?? '/', 'http://x').searchParams;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(`${JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '42' } } })}\n`);
    res.end();
  });
  const order: string[] = [];
  const events: WatchEvent<{ metadata: { resourceVersion: string } }>[] = [];
  await client.watch<{ metadata: { resourceVersion: string } }>(
    '/api/v1/nodes',
    { resourceVersion: '7', timeoutSeconds: 300 },
    (ev) => {
      order.push('event');
      events.push(ev);
    },
    new AbortController().signal,
    { onOpen: () => order.push('open') },
  );
  t.equal(asked?.get('watch'), '1');
  t.equal(asked?.get('allowWatchBookmarks'), 'true');
  t.equal(asked?.get('resourceVersion'), '7');
  t.strictSame(order, ['open', 'event']);
  t.equal(events[0]?.object.metadata.resourceVersion, '42');
});

t.test('410 reads as such, in the stream or as the answer; a refused watch is not "open"', async (t) => {
  const gone = {
    kind: 'Status',
    code: 410,
    reason: 'Expired',
    message: 'too old resource version: 7 (90)',
  };
  let inStream = true;
  const client = await fakeApiServer((_req, res) => {
    if (inStream) {
      res.writeHead(200);
      res.end(`${JSON.stringify({ type: 'ERROR', object: gone })}\n`);
    } else {
      res.writeHead(410, { 'content-type': 'application/json' });
      res.end(JSON.stringify(gone));
    }
  });
  const watch = (onOpen: () => void) =>
    client.watch('/api/v1/nodes', { resourceVersion: '7' }, () => {}, new AbortController().signal, {
      onOpen,
    });
  let opened = 0;
  await t.rejects(
    watch(() => opened++),
    { name: 'ApiError', code: 410, reason: 'Expired' },
  );
  t.equal(opened, 1, 'in the stream: the watch was accepted first');
  inStream = false;
  await t.rejects(
    watch(() => opened++),
    { name: 'ApiError', code: 410, reason: 'Expired', detail: 'too old resource version: 7 (90)' },
  );
  t.equal(opened, 1, 'as the answer: never open');
});
