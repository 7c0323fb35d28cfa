// A list read in pages (`limit` + `continue`), each item trimmed as it arrives: reading a
// resource of thousands of objects holds one page and the trimmed items, never the whole list
// as one buffer and one parse.
import type { KubeClient } from './client.ts';
import type { KubeList, KubeObject } from './types.ts';

export interface PagedListOptions {
  fieldSelector?: string | undefined;
  labelSelector?: string | undefined;
  /** Objects per page (the API server's `limit`). */
  pageSize: number;
  /** Keeps what a caller reads of each object (the rest is garbage before the next page arrives). */
  trim?: ((o: KubeObject) => KubeObject) | undefined;
  /** Per page. */
  timeoutMs?: number;
  signal?: AbortSignal;
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
  let resourceVersion: string | undefined;
  let cont: string | undefined;
  let pages = 0;
  do {
    const page: KubeList = await client.get<KubeList>(path, {
      query: {
        fieldSelector: opts.fieldSelector,
        labelSelector: opts.labelSelector,
        limit: opts.pageSize,
        continue: cont,
      },
      timeoutMs: opts.timeoutMs ?? 15_000,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    pages++;
    resourceVersion ??= page.metadata?.resourceVersion;
    for (const o of page.items ?? []) items.push(opts.trim ? opts.trim(o) : o);
    cont = page.metadata?.continue || undefined;
  } while (cont);
  return { items, resourceVersion, pages };
}
