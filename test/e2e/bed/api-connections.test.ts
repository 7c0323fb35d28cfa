// Dead and throttled API connections, against a real API server behind a test proxy that holds
// the API server's own certificate (so clients verify it as usual) and can (a) black-hole every
// established connection — sockets stay open, nothing more is forwarded, as when a NAT entry or
// a load balancer drops the flow without a FIN — and (b) answer 429 with Retry-After.
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { type ControlPlane, sharedControlPlane } from '../../../lab/bed/control-plane.ts';
import { waitFor } from '../../../shared/clock.ts';
import { KubeClient } from '../../../shared/kube/client.ts';
import { Informer } from '../../../shared/kube/informer.ts';
import type { Node } from '../../../shared/kube/types.ts';
import { createLogger } from '../../../shared/log.ts';

interface Seen {
  t: number;
  method: string;
  url: string;
  status: number;
}

/** A TLS-terminating proxy in front of the API server. */
async function apiProxy(cp: ControlPlane) {
  const upstream = new URL(cp.server);
  const ca = cp.target.ca;
  const seen: Seen[] = [];
  const live = new Set<() => void>();
  const upstreams = new Set<import('node:http').ClientRequest>();
  let throttle: { left: number; retryAfter: string } | undefined;
  const server = https.createServer(
    {
      cert: readFileSync(join(cp.dir, 'apiserver.crt')),
      key: readFileSync(join(cp.dir, 'apiserver.key')),
    },
    (req, res) => {
      const entry: Seen = { t: Date.now(), method: req.method ?? '', url: req.url ?? '', status: 0 };
      seen.push(entry);
      if (throttle && throttle.left > 0) {
        throttle.left--;
        entry.status = 429;
        req.resume();
        res.writeHead(429, { 'retry-after': throttle.retryAfter, 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            kind: 'Status',
            code: 429,
            reason: 'TooManyRequests',
            message: 'throttled by test',
          }),
        );
        return;
      }
      const up = https.request(
        {
          host: upstream.hostname,
          port: upstream.port,
          path: req.url,
          method: req.method,
          headers: req.headers,
          ca,
        },
        (ures) => {
          entry.status = ures.statusCode ?? 0;
          res.writeHead(ures.statusCode ?? 502, ures.headers);
          ures.pipe(res);
          // Black-holing: stop forwarding, keep both sockets open, send nothing at all.
          live.add(() => {
            ures.unpipe(res);
            ures.pause();
          });
        },
      );
      upstreams.add(up);
      up.on('close', () => upstreams.delete(up));
      req.pipe(up);
      up.on('error', () => res.destroy());
    },
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    seen,
    client: (onResult?: (ok: boolean) => void) =>
      new KubeClient({ ...cp.target, server: `https://127.0.0.1:${port}` }, onResult ? { onResult } : {}),
    blackhole() {
      for (const f of live) f();
      live.clear();
    },
    throttleNext(n: number, retryAfterSeconds: number) {
      throttle = { left: n, retryAfter: String(retryAfterSeconds) };
    },
    close: () =>
      new Promise<void>((r) => {
        // Black-holed streams hold their upstream sockets open: end them too.
        for (const up of upstreams) up.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

let cp: ControlPlane;
let proxy: Awaited<ReturnType<typeof apiProxy>>;
t.before(async () => {
  cp = await sharedControlPlane();
  proxy = await apiProxy(cp);
});
t.teardown(() => proxy?.close());

t.test(
  'a black-holed watch is re-opened after the idle limit: a cordon is seen, and no "API down" is reported',
  async (t) => {
    const admin = cp.client();
    await admin.create('/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'blackhole-node' },
    });
    let failures = 0;
    const client = proxy.client((ok) => {
      if (!ok) failures++;
    });
    let latest: Node | undefined;
    const informer = new Informer(client, {
      path: '/api/v1/nodes',
      fieldSelector: 'metadata.name=blackhole-node',
      log: createLogger('test', 'silent'),
      idleTimeoutMs: 3_000,
      onChange: (objs) => {
        latest = objs.values().next().value as Node | undefined;
      },
    });
    informer.start();
    try {
      await waitFor('synced', () => latest !== undefined, { timeoutMs: 10_000 });
      await waitFor(
        'watch open',
        () => proxy.seen.some((s) => s.url.includes('watch=1') && s.status === 200),
        {
          timeoutMs: 10_000,
        },
      );
      proxy.blackhole();
      await admin.patch('/api/v1/nodes/blackhole-node', { spec: { unschedulable: true } }, 'merge');
      // Without the idle limit the dead stream stays silent (90 s before; forever without a timer).
      await waitFor(
        'the cordon is seen through a re-opened watch',
        () => latest?.spec?.unschedulable === true,
        {
          timeoutMs: 15_000,
          intervalMs: 50,
        },
      );
      t.equal(failures, 0, 'a silent watch re-opened is not an API failure');
      t.equal(informer.restarts, 0, 'no relist: the watch resumed from its resourceVersion');
    } finally {
      await informer.stop();
      client.close();
      admin.close();
    }
  },
);

t.test(
  "429 with Retry-After: the informer's relist and a request's retry wait as long as the server asks",
  async (t) => {
    const client = proxy.client();
    const informer = new Informer(client, {
      path: '/api/v1/namespaces',
      log: createLogger('test', 'silent'),
      onChange: () => {},
    });
    const from = proxy.seen.length;
    proxy.throttleNext(1, 2);
    informer.start();
    try {
      await waitFor('synced after the 429', () => informer.hasSynced, { timeoutMs: 15_000 });
      const [refused, next] = proxy.seen.slice(from);
      t.equal(refused?.status, 429);
      // Backoff alone would retry after 125–250 ms.
      t.ok(next!.t - refused!.t >= 1_900, `relisted ${next!.t - refused!.t} ms after a Retry-After: 2`);
    } finally {
      await informer.stop();
    }
    const start = proxy.seen.length;
    proxy.throttleNext(2, 1);
    await client.get('/api/v1/namespaces/default', { retries: 3 });
    const tries = proxy.seen.slice(start);
    t.strictSame(
      tries.map((s) => s.status),
      [429, 429, 200],
    );
    t.ok(tries[1]!.t - tries[0]!.t >= 900 && tries[2]!.t - tries[1]!.t >= 900, JSON.stringify(tries));
    client.close();
  },
);
