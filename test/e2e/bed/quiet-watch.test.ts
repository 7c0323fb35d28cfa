// A quiet informer (one Node that never changes) while other Nodes churn, against a real API
// server: it must not re-list and never get 410, even after the watch cache moved past the
// version of its first list (the cache keeps about 75 s of history: the test runs ~100 s). Its
// requests are counted by a TLS-terminating proxy between it and the API server, which also reads
// every watch stream (bookmarks, 410 ERROR events) and can cut the watches, as a dropped
// connection would. Counted on the wire, not by the informer: what the API server is asked is
// what the cluster pays for.
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { type ControlPlane, sharedControlPlane } from '../../../lab/bed/control-plane.ts';
import { waitFor } from '../../../shared/clock.ts';
import { isApiError, KubeClient } from '../../../shared/kube/client.ts';
import { Informer } from '../../../shared/kube/informer.ts';
import type { Node } from '../../../shared/kube/types.ts';
import { createLogger } from '../../../shared/log.ts';

interface Call {
  verb: 'LIST' | 'WATCH' | 'OTHER';
  query: URLSearchParams;
  status: number;
  bookmarks: number;
  /** ERROR events with code 410 in the stream. */
  gone: number;
}

/** Forwards to the API server and counts what passes, per request. */
async function countingProxy(cp: ControlPlane) {
  const upstream = new URL(cp.server);
  const calls: Call[] = [];
  const open = new Set<ServerResponse>();
  const forward = (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', upstream);
    const watch = url.searchParams.get('watch') === '1';
    const call: Call = {
      verb: req.method !== 'GET' ? 'OTHER' : watch ? 'WATCH' : 'LIST',
      query: url.searchParams,
      status: 0,
      bookmarks: 0,
      gone: 0,
    };
    calls.push(call);
    const up = https.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        path: req.url,
        method: req.method,
        headers: req.headers,
        ca: cp.target.ca,
      },
      (ures) => {
        call.status = ures.statusCode ?? 0;
        res.writeHead(ures.statusCode ?? 502, ures.headers);
        ures.pipe(res);
        if (!watch) return;
        open.add(res);
        res.on('close', () => open.delete(res));
        let buf = '';
        ures.setEncoding('utf8');
        ures.on('data', (chunk: string) => {
          buf += chunk;
          for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (!line.trim()) continue;
            const ev = JSON.parse(line) as { type: string; object?: { code?: number } };
            if (ev.type === 'BOOKMARK') call.bookmarks++;
            if (ev.type === 'ERROR' && ev.object?.code === 410) call.gone++;
          }
        });
      },
    );
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  };
  const server = https.createServer(
    { cert: readFileSync(join(cp.dir, 'apiserver.crt')), key: readFileSync(join(cp.dir, 'apiserver.key')) },
    forward,
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const sum = (verb: Call['verb'], f: (c: Call) => number) =>
    calls.filter((c) => c.verb === verb).reduce((n, c) => n + f(c), 0);
  return {
    calls,
    client: () => new KubeClient({ ...cp.target, server: `https://127.0.0.1:${port}` }),
    counts: () => ({
      lists: sum('LIST', () => 1),
      watches: sum('WATCH', (c) => (c.status === 200 ? 1 : 0)),
      gone: sum('WATCH', (c) => c.gone + (c.status === 410 ? 1 : 0)),
      bookmarks: sum('WATCH', (c) => c.bookmarks),
    }),
    /** Cuts every open watch mid-stream, as a dropped connection or a restarted proxy does. */
    cutWatches() {
      for (const res of open) res.destroy();
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

t.test(
  'a quiet informer keeps its watch across the watch cache moving on: one LIST, no 410, bookmarks',
  async (t) => {
    const cp = await sharedControlPlane();
    const proxy = await countingProxy(cp);
    t.teardown(proxy.close);
    const admin = cp.client();
    const nodes = ['quiet-node', ...Array.from({ length: 5 }, (_, i) => `churn-${i}`)];
    for (const name of nodes)
      await admin.create('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name } });
    const client = proxy.client();
    let quiet: Node | undefined;
    // The product's defaults (idle limit, watch timeout): they are what is under test.
    const informer = new Informer(client, {
      path: '/api/v1/nodes',
      fieldSelector: 'metadata.name=quiet-node',
      log: createLogger('test', 'silent'),
      onChange: (objs) => {
        quiet = objs.values().next().value as Node | undefined;
      },
    });
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
      await waitFor('the first watch is open', () => proxy.counts().watches > 0 && quiet !== undefined, {
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
        () => quiet?.metadata?.labels?.seen === 'yes',
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
