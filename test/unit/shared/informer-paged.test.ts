// The Informer's paged list (paged-list.ts) and its trim hook, against a scripted API: pages with
// limit/continue and no resourceVersion=0 (a 1.20 API server ignores limit with it), every listed
// and watched object trimmed before it is cached, the watch from the first page's version.
import pino from 'pino';
import t from 'tap';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeClient, WatchOptions } from '../../../shared/kube/client.ts';
import { Informer } from '../../../shared/kube/informer.ts';
import { forEachListItem, listPaged } from '../../../shared/kube/paged-list.ts';
import type { KubeObject } from '../../../shared/kube/types.ts';

const obj = (i: number, rv = '1'): KubeObject => ({
  metadata: { name: `n${i}`, resourceVersion: rv, annotations: { big: 'x'.repeat(100) } },
  spec: { i },
});

function pagedApi(total: number) {
  const requests: string[] = [];
  let onEvent: ((ev: { type: string; object: KubeObject }) => void) | undefined;
  const items = Array.from({ length: total }, (_, i) => obj(i));
  const client = {
    async get(path: string, opts: { query?: Record<string, unknown> }) {
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
      return JSON.stringify({
        kind: 'List',
        metadata: { resourceVersion: String(100 + from), continue: next },
        items: items.slice(from, from + limit),
      });
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
