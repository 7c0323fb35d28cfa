// A list read in pages (`limit` + `continue`), each page streamed and each item parsed and trimmed
// on its own as it arrives: reading a resource of thousands of objects holds one item's text and
// the trimmed items, never a page, let alone the whole list, as one buffer and one parse. Both
// matter under the sidecar's --max-semi-space-size=1: a page parsed whole lives long enough (one
// trim loop) to be promoted out of the 1 MiB young generation, and a page's text (~3 MiB) is a
// large object from the start — either stays until a full GC, page after page, so the heap grew
// to its limit (135.9 MiB peak RSS at 5,000 Nodes parsed whole, 119.8 with the text held per
// page). One ~13 KiB Node parsed, trimmed and dropped dies young.
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
  /**
   * A page whose first byte has not come after this long is asked again on a new connection, and
   * the copy that starts answering first is read (client.ts, hedgeAfterMs): a consistent read
   * that reached an API server whose etcd member is gone would otherwise hang to its timeout.
   */
  hedgeAfterMs?: number | undefined;
  signal?: AbortSignal;
  /** Called with each page's (trimmed) items as it arrives, before the list is complete. */
  onPage?: ((items: KubeObject[]) => void) | undefined;
}

/** The start of a List's items: Go writes its metadata first, and metadata holds no "items". */
const ITEMS = /"items"\s*:\s*\[/;

/**
 * Splits the text of a serialized List, fed in chunks as it arrives, into the JSON text of each
 * element of its `items` (handed to `each` at once), and keeps the rest (the List's metadata).
 * One item at a time is held, never the page.
 */
export class ListItemStream {
  private readonly each: (json: string) => void;
  private phase: 'head' | 'items' | 'tail' = 'head';
  private head = '';
  private tail = '';
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** The current item's text from earlier chunks. */
  private parts: string[] = [];

  constructor(each: (json: string) => void) {
    this.each = each;
  }

  feed(chunk: string): void {
    if (this.phase === 'tail') {
      this.tail += chunk;
      return;
    }
    if (this.phase === 'head') {
      this.head += chunk;
      const m = ITEMS.exec(this.head);
      if (!m) return;
      const rest = this.head.slice(m.index + m[0].length);
      this.head = this.head.slice(0, m.index);
      this.phase = 'items';
      this.scan(rest);
      return;
    }
    this.scan(chunk);
  }

  private scan(chunk: string): void {
    let from = this.depth > 0 ? 0 : -1;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk.charCodeAt(i);
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === 92)
          this.escaped = true; // a backslash
        else if (c === 34) this.inString = false; // a quote
        continue;
      }
      if (c === 34) this.inString = true;
      else if (c === 123 || c === 91) {
        // { [
        if (this.depth === 0) from = i;
        this.depth++;
      } else if (c === 125 || c === 93) {
        // } ]
        if (this.depth === 0) {
          this.phase = 'tail';
          this.tail = chunk.slice(i + 1);
          return;
        }
        if (--this.depth === 0) {
          this.parts.push(chunk.slice(from, i + 1));
          const json = this.parts.length === 1 ? (this.parts[0] as string) : this.parts.join('');
          this.parts = [];
          from = -1;
          this.each(json);
        }
      }
    }
    if (this.depth > 0) this.parts.push(chunk.slice(from));
  }

  /** The List without its items (metadata: resourceVersion, continue). */
  end(): Omit<KubeList, 'items'> {
    if (this.phase === 'head') {
      // No items array (an empty list may omit it, or say null): one small parse.
      const whole = JSON.parse(this.head) as KubeList;
      for (const o of whole.items ?? []) this.each(JSON.stringify(o));
      return whole.metadata ? { metadata: whole.metadata } : {};
    }
    if (this.phase === 'items') throw new SyntaxError('unterminated items in a List');
    const rest = JSON.parse(`${this.head}"items":[]${this.tail}`) as KubeList;
    return rest.metadata ? { metadata: rest.metadata } : {};
  }
}

/**
 * Calls `each` with the JSON text of every element of a serialized List's `items`, in order, and
 * returns the List without them (its metadata).
 */
export function forEachListItem(text: string, each: (json: string) => void): Omit<KubeList, 'items'> {
  const stream = new ListItemStream(each);
  stream.feed(text);
  return stream.end();
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
    const page: KubeObject[] = [];
    const stream = new ListItemStream((json) => page.push(trim(JSON.parse(json) as KubeObject)));
    // Streamed: the page's text is never held whole, each item parsed and trimmed as it arrives.
    await client.get<void>(path, {
      query: {
        fieldSelector: opts.fieldSelector,
        labelSelector: opts.labelSelector,
        limit: opts.pageSize,
        continue: cont,
      },
      onText: (chunk) => stream.feed(chunk),
      timeoutMs: opts.timeoutMs ?? 15_000,
      ...(opts.hedgeAfterMs !== undefined ? { hedgeAfterMs: opts.hedgeAfterMs } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    pages++;
    const list = stream.end();
    for (const o of page) items.push(o);
    opts.onPage?.(page);
    resourceVersion ??= list.metadata?.resourceVersion;
    cont = list.metadata?.continue || undefined;
  } while (cont);
  return { items, resourceVersion, pages };
}
