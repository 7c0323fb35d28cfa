// Where a consistent LIST of the Nodes is served from, read off the API server's own metrics: the
// watch cache (`apiserver_cache_list_total`, ConsistentListFromCache: the server waits until its
// cache has caught up with etcd's current revision, then answers from memory) or etcd
// (`etcd_requests_total{operation="listWithCount"}`, a range read over every Node). The sidecar's
// wide reads are consistent paged lists (shared/kube/paged-list.ts): on a 1.20 API server each
// page was an etcd range read; what a current one does decides what a drain costs etcd.
import type { KubeClient } from '../../../shared/kube/client.ts';

/** The sum of every sample of `name` whose labels contain all of `labels` (Prometheus text). */
export function metricSum(text: string, name: string, labels: Record<string, string>): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const m = /^[^{\s]+(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const have = m[1] ?? '';
    if (Object.entries(labels).every(([k, v]) => have.includes(`${k}="${v}"`))) sum += Number(m[2]);
  }
  return sum;
}

/**
 * The Node lists served from the watch cache and from etcd so far. Two label schemes: 1.20's
 * (`resource_prefix="/minions"`; etcd's `type="/registry/minions"`, operation `listWithCount`) and
 * the current one (`group="",resource="nodes"`; etcd's operations `list`, `listWithCount`,
 * `listStream`, k8s.io/apiserver's storage metrics; seen on 1.37.2). A server exports one of them:
 * the larger sum.
 */
export function nodeListCounts(text: string): { cache: number; etcd: number } {
  const nodes = { group: '', resource: 'nodes' };
  // 1.37 counts a consistent read the cache served in apiserver_watch_cache_consistent_read_total
  // (`fallback="true"`: it went to etcd after all), not in apiserver_cache_list_total.
  const cache = Math.max(
    metricSum(text, 'apiserver_cache_list_total', { resource_prefix: '/minions' }),
    metricSum(text, 'apiserver_cache_list_total', nodes) +
      metricSum(text, 'apiserver_watch_cache_consistent_read_total', {
        ...nodes,
        fallback: 'false',
        success: 'true',
      }),
  );
  const etcd = Math.max(
    metricSum(text, 'etcd_requests_total', { operation: 'listWithCount', type: '/registry/minions' }),
    ['list', 'listWithCount', 'listStream']
      .map((operation) => metricSum(text, 'etcd_requests_total', { operation, ...nodes }))
      .reduce((a, b) => a + b, 0),
  );
  return { cache, etcd };
}

export interface ListSource {
  /** Paged consistent lists made (limit 250, no resourceVersion: what the sidecar sends). */
  lists: number;
  pages: number;
  /** Lists of Nodes the API server answered from its watch cache, and from etcd, meanwhile. */
  from_cache: number;
  from_etcd: number;
  /** The same for `resourceVersion=0` (any cached state; the informers' re-list never uses it). */
  rv0_from_cache: number;
  rv0_from_etcd: number;
}

/** Makes `lists` consistent paged lists of the Nodes and `lists` RV=0 ones; counts where each went. */
export async function consistentListSource(client: KubeClient, lists = 5): Promise<ListSource> {
  const read = async () => {
    const text = await client.get<string>('/metrics', { text: true, timeoutMs: 20_000 });
    return nodeListCounts(text);
  };
  let pages = 0;
  const page = async (query: string) => {
    let cont = '';
    do {
      const r = await client.get<{ metadata?: { continue?: string } }>(
        `/api/v1/nodes?limit=250${query}${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`,
        { timeoutMs: 60_000 },
      );
      pages++;
      cont = r.metadata?.continue ?? '';
    } while (cont);
  };
  const a = await read();
  for (let i = 0; i < lists; i++) await page('');
  const b = await read();
  for (let i = 0; i < lists; i++) await page('&resourceVersion=0');
  const c = await read();
  return {
    lists,
    pages,
    from_cache: b.cache - a.cache,
    from_etcd: b.etcd - a.etcd,
    rv0_from_cache: c.cache - b.cache,
    rv0_from_etcd: c.etcd - b.etcd,
  };
}
