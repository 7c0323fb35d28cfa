// The Informer's paged list (paged-list.ts) and its trim hook, against a scripted API: pages with
// limit/continue and no resourceVersion=0 (a 1.20 API server ignores limit with it), every listed
// and watched object trimmed before it is cached, the watch from the first page's version.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import t from 'tap';
import { waitFor } from '../../../../shared/clock.ts';
import { KubeClient } from '../../../../shared/kube/client.ts';
import { Informer } from '../../../../shared/kube/informer.ts';
import { forEachListItem, ListItemStream, listPaged } from '../../../../shared/kube/paged-list.ts';
import type { WatchOptions } from '../../../../shared/kube/request.ts';
import type { KubeObject } from '../../../../shared/kube/types.ts';

const obj = (i: number, rv = '1'): KubeObject => ({
  metadata: { name: `n${i}`, resourceVersion: rv, annotations: { big: 'x'.repeat(100) } },
  spec: { i },
});

/** A body as the client hands it over: streamed in small chunks when asked to (onText). */
function streamed(text: string, opts: { onText?: (chunk: string) => void }): string | undefined {
  if (!opts.onText) return text;
  for (let i = 0; i < text.length; i += 97) opts.onText(text.slice(i, i + 97));
  return undefined;
}

function pagedApi(total: number) {
  const requests: string[] = [];
  let onEvent: ((ev: { type: string; object: KubeObject }) => void) | undefined;
  const items = Array.from({ length: total }, (_, i) => obj(i));
  const client = {
    async get(path: string, opts: { query?: Record<string, unknown>; onText?: (c: string) => void }) {
      const q = opts.query ?? {};
      requests.push(
        `LIST ${path} ${Object.entries(q)
          .filter(([, v]) => v !== undefined)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')}`.trim(),
      );
      const from = Number(q.continue ?? 0);
      const limit = Number(q.limit);
      const next = from + limit < items.length ? String(from + limit) : undefined;
      // Later pages carry later versions: the list's own is the first page's. Served as text.
      return streamed(
        JSON.stringify({
          kind: 'List',
          metadata: { resourceVersion: String(100 + from), continue: next },
          items: items.slice(from, from + limit),
        }),
        opts,
      );
    },
    async watch(
      _path: string,
      query: Record<string, unknown>,
      on: typeof onEvent,
      signal: AbortSignal,
      opts: WatchOptions = {},
    ) {
      requests.push(`WATCH from ${query.resourceVersion}`);
      onEvent = on;
      opts.onOpen?.();
      await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
    },
  } as unknown as KubeClient;
  return { client, requests, emit: (ev: { type: string; object: KubeObject }) => onEvent?.(ev) };
}

const trim = (o: KubeObject): KubeObject => ({ metadata: { name: o.metadata?.name } });

t.test('listPaged: every page, limit and continue, no resourceVersion, each item trimmed', async (t) => {
  const api = pagedApi(7);
  const out = await listPaged(api.client, '/api/v1/nodes', { pageSize: 3, trim, labelSelector: 'a=b' });
  t.strictSame(api.requests, [
    'LIST /api/v1/nodes labelSelector=a=b limit=3',
    'LIST /api/v1/nodes labelSelector=a=b limit=3 continue=3',
    'LIST /api/v1/nodes labelSelector=a=b limit=3 continue=6',
  ]);
  t.equal(out.items.length, 7);
  t.equal(out.pages, 3);
  t.equal(out.resourceVersion, '100', "the first page's version: the snapshot the others continue");
  t.strictSame(out.items[6], { metadata: { name: 'n6' } });
});

t.test('a paged informer lists in pages, trims what it caches and watches from the list', async (t) => {
  const api = pagedApi(5);
  const informer = new Informer(api.client, {
    path: '/api/v1/nodes',
    pageSize: 2,
    trim,
    log: pino({ level: 'silent' }),
    onChange: () => {},
  });
  informer.start();
  try {
    await waitFor('watching', () => api.requests.some((r) => r.startsWith('WATCH')), { timeoutMs: 2_000 });
    t.strictSame(api.requests, [
      'LIST /api/v1/nodes limit=2',
      'LIST /api/v1/nodes limit=2 continue=2',
      'LIST /api/v1/nodes limit=2 continue=4',
      'WATCH from 100',
    ]);
    t.equal(informer.objects.size, 5);
    t.strictSame(informer.objects.get('/n3'), { metadata: { name: 'n3' } }, 'cached trimmed');
    t.equal(informer.stats.lists, 1, 'one list of three pages');
    api.emit({ type: 'MODIFIED', object: obj(3, '120') });
    t.strictSame(informer.objects.get('/n3'), { metadata: { name: 'n3' } }, 'a watched object trimmed too');
  } finally {
    await informer.stop();
  }
});

t.test(
  'forEachListItem: each item as its own JSON text, whatever its strings hold; the metadata',
  async (t) => {
    const items = [
      {
        metadata: {
          name: 'a',
          annotations: { tricky: 'brackets ] } [ { and "quotes" and \\ backslashes \\' },
        },
      },
      { metadata: { name: 'b' }, spec: { list: [[1, 2], [], [{}]], s: '\\"' } },
      { metadata: { name: 'ü-ß', labels: { e: '' } } },
    ];
    const text = JSON.stringify({
      kind: 'NodeList',
      metadata: { resourceVersion: '7', continue: 'eyJ2Ijo' },
      items,
    });
    const seen: unknown[] = [];
    const meta = forEachListItem(text, (json) => seen.push(JSON.parse(json)));
    t.strictSame(seen, items);
    t.strictSame(meta, { metadata: { resourceVersion: '7', continue: 'eyJ2Ijo' } });
    // Fields after the items, whitespace, an empty list, no items at all.
    const after = forEachListItem(
      '{ "items" : [ {"a":1} , {"b":[2]} ], "metadata": {"resourceVersion":"9"} }',
      (json) => seen.push(JSON.parse(json)),
    );
    t.strictSame(seen.slice(3), [{ a: 1 }, { b: [2] }]);
    t.strictSame(after, { metadata: { resourceVersion: '9' } });
    let n = 0;
    t.strictSame(
      forEachListItem('{"metadata":{"resourceVersion":"1"},"items":[]}', () => n++),
      { metadata: { resourceVersion: '1' } },
    );
    t.strictSame(
      forEachListItem('{"metadata":{}}', () => n++),
      { metadata: {} },
    );
    t.equal(n, 0);
    t.throws(() => forEachListItem('{"items":[{"a":"x}]}', () => {}), SyntaxError);
  },
);

t.test('ListItemStream: the same items however the text is cut into chunks', async (t) => {
  const items = [
    { metadata: { name: 'ü-ß-日本', annotations: { a: '] } [ { "x" \\\\ \\"' } } },
    { spec: { list: [[1, 2], [], [{}]] } },
    {},
  ];
  const text = JSON.stringify({ kind: 'List', metadata: { resourceVersion: '3', continue: 'c' }, items });
  for (const size of [1, 2, 5, 13, 64, text.length]) {
    const seen: unknown[] = [];
    const stream = new ListItemStream((json) => seen.push(JSON.parse(json)));
    for (let i = 0; i < text.length; i += size) stream.feed(text.slice(i, i + size));
    t.strictSame(stream.end(), { metadata: { resourceVersion: '3', continue: 'c' } }, `chunks of ${size}`);
    t.strictSame(seen, items, `chunks of ${size}`);
  }
});

t.test('listPaged over HTTP: each page streamed to the parser, never returned whole', async (t) => {
  const nodes = Array.from({ length: 25 }, (_, i) => ({
    metadata: { name: `n${i}`, labels: { big: 'x'.repeat(3_000) } },
  }));
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    const q = new URL(req.url ?? '/', 'http://x').searchParams;
    seen.push(`${q.get('limit')} ${q.get('continue') ?? ''}`.trim());
    const from = Number(q.get('continue') ?? 0);
    const next = from + 10 < nodes.length ? String(from + 10) : undefined;
    const body = JSON.stringify({
      kind: 'NodeList',
      metadata: { resourceVersion: '42', ...(next ? { continue: next } : {}) },
      items: nodes.slice(from, from + 10),
    });
    res.writeHead(200, { 'content-type': 'application/json' });
    // In pieces, as a large answer arrives.
    for (let i = 0; i < body.length; i += 1_000) res.write(body.slice(i, i + 1_000));
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const agent = new http.Agent();
  const client = new KubeClient({
    server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    apply: async () => ({ agent, headers: {} }),
    close: () => agent.destroy(),
  });
  t.teardown(() => client.close());
  const out = await listPaged(client, '/api/v1/nodes', { pageSize: 10, trim });
  t.strictSame(seen, ['10', '10 10', '10 20']);
  t.equal(out.items.length, 25);
  t.equal(out.resourceVersion, '42');
  t.strictSame(out.items[24], { metadata: { name: 'n24' } });
});
