// A quiet informer (one Node that never changes) while other Nodes churn, against a real API
// server: it must not re-list and never get 410, even after the watch cache moved past the
// version of its first list (the cache keeps about 75 s of history: the test runs ~100 s). Its
// requests are counted by a TLS-terminating proxy between it and the API server (./api-proxy.ts),
// which also reads every watch stream (bookmarks, 410 ERROR events) and can cut the watches, as a
// dropped connection would. Counted on the wire, not by the informer: what the API server is asked is
// what the cluster pays for.
import t from 'tap';
import { sharedControlPlane } from '../../../lab/bed/control-plane.ts';
import { waitFor } from '../../../shared/clock.ts';
import { isApiError } from '../../../shared/kube/api-error.ts';
import { apiProxy } from './api-proxy.ts';
import { oneNodeInformer } from './one-node.ts';

t.test(
  'a quiet informer keeps its watch across the watch cache moving on: one LIST, no 410, bookmarks',
  async (t) => {
    const cp = await sharedControlPlane();
    const proxy = await apiProxy(cp);
    t.teardown(proxy.close);
    const admin = cp.client();
    const nodes = ['quiet-node', ...Array.from({ length: 5 }, (_, i) => `churn-${i}`)];
    for (const name of nodes)
      await admin.create('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name } });
    const client = proxy.client();
    // The product's defaults (idle limit, watch timeout): they are what is under test.
    const { informer, node: quiet } = oneNodeInformer(client, 'quiet-node');
    // Churn elsewhere in the resource at ~1.1 changes/s: the watch cache (100 events at least,
    // grown only while its oldest event is younger than 75 s) then drops events older than ~90 s.
    let n = 0;
    const churn = setInterval(() => {
      n++;
      void admin
        .patch(`/api/v1/nodes/churn-${n % 5}`, { metadata: { labels: { churn: String(n) } } }, 'merge')
        .catch(() => {});
    }, 900);
    const started = Date.now();
    informer.start();
    try {
      await waitFor('the first watch is open', () => proxy.counts().watches > 0 && quiet() !== undefined, {
        timeoutMs: 15_000,
      });
      const firstWatch = proxy.calls.find((c) => c.verb === 'WATCH')!;
      const listedAt = firstWatch.query.get('resourceVersion') ?? '';
      t.equal(firstWatch.query.get('allowWatchBookmarks'), 'true', 'bookmarks are asked for');
      const timeout = Number(firstWatch.query.get('timeoutSeconds'));
      t.ok(timeout >= 300 && timeout < 600, `watch timeout ${timeout} s (5 to 10 min)`);
      t.equal(proxy.calls[0]?.query.get('resourceVersion'), '0', 'the list is served from the watch cache');

      // Probes (straight to the API server): a watch from the first list's version gets 410 once
      // the cache has moved past it. Stops early if the informer re-lists or gets 410 first.
      const movedOn = async () => {
        const c = proxy.counts();
        if (c.lists > 1 || c.gone > 0) return 'the informer re-listed first';
        try {
          await admin.watch(
            '/api/v1/nodes',
            { fieldSelector: 'metadata.name=quiet-node', resourceVersion: listedAt, timeoutSeconds: 1 },
            () => {},
            new AbortController().signal,
          );
          return false;
        } catch (e) {
          if (isApiError(e, 410)) return 'the watch cache moved past the first list';
          throw e;
        }
      };
      const why = await waitFor('the watch cache moves past the first list', movedOn, {
        timeoutMs: 240_000,
        intervalMs: 2_000,
      });
      t.comment(`${why} after ${Math.round((Date.now() - started) / 1000)} s (${n} changes elsewhere)`);

      // A dropped connection now: the watch must resume from a version the cache still has.
      proxy.cutWatches();
      await admin.patch('/api/v1/nodes/quiet-node', { metadata: { labels: { seen: 'yes' } } }, 'merge');
      await waitFor(
        'the change is seen through a resumed watch (or a re-list)',
        () => quiet()?.metadata?.labels?.seen === 'yes',
        { timeoutMs: 30_000 },
      );
      const c = proxy.counts();
      t.comment(
        `over ${Math.round((Date.now() - started) / 1000)} s: ${c.lists} LIST, ${c.watches} WATCH, ` +
          `${c.gone} × 410, ${c.bookmarks} bookmarks`,
      );
      t.equal(c.lists, 1, 'one LIST: no re-list');
      t.equal(c.gone, 0, 'no 410');
      t.ok(c.bookmarks >= 1, 'bookmarks kept the resourceVersion fresh');
      t.ok(c.watches >= 2, 'the cut watch was re-opened');
    } finally {
      clearInterval(churn);
      await informer.stop();
      client.close();
      admin.close();
    }
  },
);
