// A list read in pages (`limit` + `continue`), each item parsed and trimmed on its own: reading a
// resource of thousands of objects holds one page's text and the trimmed items, never the whole
// list as one buffer and one parse. Parsing item by item matters as much as paging: a page parsed
// whole lives long enough (one trim loop) to be promoted out of V8's young generation (1 MiB with
// the sidecar's --max-semi-space-size=1) and then stays until a full GC, page after page, so the
// heap grew to its limit; one ~13 KiB Node parsed, trimmed and dropped dies young.
import type { KubeClient } from './client.ts';
import type { KubeList, KubeObject } from './types.ts';

export interface PagedListOptions {
  fieldSelector?: string | undefined;
  labelSelector?: string | undefined;
  /** Objects per page (the API server's `limit`). */
  pageSize: number;
  /** Keeps what a caller reads of each object (the rest is garbage at once). */
  trim?: ((o: KubeObject) => KubeObject) | undefined;
  /** Per page. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Called with each page's (trimmed) items as it arrives, before the list is complete. */
  onPage?: ((items: KubeObject[]) => void) | undefined;
}

/** Where the next `"`, `{`, `}`, `[` or `]` is. */
const STRUCTURAL = /["{}[\]]/g;

/**
 * Calls `each` with the JSON text of every element of a serialized List's `items`, in order, and
 * returns the List without them (its metadata). Falls back to one parse when the text has no
 * top-level `items` array where expected.
 */
export function forEachListItem(text: string, each: (json: string) => void): Omit<KubeList, 'items'> {
  // Go writes a List's metadata before its items; metadata (resourceVersion, continue) holds no "items".
  const key = text.indexOf('"items":');
  const open = key < 0 ? -1 : text.indexOf('[', key);
  if (open < 0 || /\S/.test(text.slice(key + 8, open))) {
    const whole = JSON.parse(text) as KubeList;
    for (const o of whole.items ?? []) each(JSON.stringify(o));
    return { ...(whole.metadata ? { metadata: whole.metadata } : {}) };
  }
  let depth = 0;
  let start = -1;
  let end = -1;
  STRUCTURAL.lastIndex = open + 1;
  for (let m = STRUCTURAL.exec(text); m; m = STRUCTURAL.exec(text)) {
    const c = m[0];
    if (c === '"') {
      // Skip the string: to the next quote not escaped by an odd run of backslashes.
      let q = m.index;
      for (;;) {
        q = text.indexOf('"', q + 1);
        if (q < 0) throw new SyntaxError('unterminated string in a List');
        let b = q - 1;
        while (text.charCodeAt(b) === 92) b--;
        if ((q - 1 - b) % 2 === 0) break;
      }
      STRUCTURAL.lastIndex = q + 1;
    } else if (c === '{' || c === '[') {
      if (depth === 0) start = m.index;
      depth++;
    } else if (depth === 0) {
      end = m.index;
      break;
    } else if (--depth === 0) each(text.slice(start, m.index + 1));
  }
  if (end < 0) throw new SyntaxError('unterminated items in a List');
  const rest = JSON.parse(`${text.slice(0, key)}"items":[]${text.slice(end + 1)}`) as KubeList;
  return { ...(rest.metadata ? { metadata: rest.metadata } : {}) };
}

/**
 * Every page of a collection; returns the trimmed items and the list's resourceVersion (the first
 * page's: the snapshot every later page continues).
 *
 * No `resourceVersion`: a consistent read from etcd, page by page. With `resourceVersion=0` a
 * 1.20 API server serves the list from its watch cache and IGNORES `limit` (one response with
 * every object), which is exactly the buffer this module exists to avoid. An expired continue
 * token (410) fails the whole list; the caller lists again from the start.
 */
export async function listPaged(
  client: KubeClient,
  path: string,
  opts: PagedListOptions,
): Promise<{ items: KubeObject[]; resourceVersion: string | undefined; pages: number }> {
  const items: KubeObject[] = [];
  const trim = opts.trim ?? ((o: KubeObject) => o);
  let resourceVersion: string | undefined;
  let cont: string | undefined;
  let pages = 0;
  do {
    const text = await client.get<string>(path, {
      query: {
        fieldSelector: opts.fieldSelector,
        labelSelector: opts.labelSelector,
        limit: opts.pageSize,
        continue: cont,
      },
      text: true,
      timeoutMs: opts.timeoutMs ?? 15_000,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    pages++;
    const page: KubeObject[] = [];
    const list = forEachListItem(text, (json) => page.push(trim(JSON.parse(json) as KubeObject)));
    for (const o of page) items.push(o);
    opts.onPage?.(page);
    resourceVersion ??= list.metadata?.resourceVersion;
    cont = list.metadata?.continue || undefined;
  } while (cont);
  return { items, resourceVersion, pages };
}
