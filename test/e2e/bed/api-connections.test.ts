// Dead and throttled API connections, against a real API server behind a test proxy
// (./api-proxy.ts) that can (a) black-hole every established connection — sockets stay open,
// nothing more is forwarded, as when a NAT entry or a load balancer drops the flow without a
// FIN — and (b) answer 429 with Retry-After.
import t from 'tap';
import { type ControlPlane, sharedControlPlane } from '../../../lab/bed/control-plane.ts';
import { waitFor } from '../../../shared/clock.ts';
import { Informer } from '../../../shared/kube/informer.ts';
import { createLogger } from '../../../shared/log.ts';
import { type ApiProxy, apiProxy } from './api-proxy.ts';
import { oneNodeInformer } from './one-node.ts';

let cp: ControlPlane;
let proxy: ApiProxy;
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
    const client = proxy.client({
      onResult: (ok) => {
        if (!ok) failures++;
      },
    });
    const { informer, node: latest } = oneNodeInformer(client, 'blackhole-node', { idleTimeoutMs: 3_000 });
    informer.start();
    try {
      await waitFor('synced', () => latest() !== undefined, { timeoutMs: 10_000 });
      await waitFor(
        'watch open',
        () => proxy.calls.some((s) => s.url.includes('watch=1') && s.status === 200),
        {
          timeoutMs: 10_000,
        },
      );
      proxy.blackhole();
      await admin.patch('/api/v1/nodes/blackhole-node', { spec: { unschedulable: true } }, 'merge');
      // Without the idle limit the dead stream stays silent (90 s before; forever without a timer).
      await waitFor(
        'the cordon is seen through a re-opened watch',
        () => latest()?.spec?.unschedulable === true,
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
    const from = proxy.calls.length;
    proxy.throttleNext(1, 2, '/api/v1/namespaces');
    informer.start();
    try {
      await waitFor('synced after the 429', () => informer.hasSynced, { timeoutMs: 15_000 });
      const [refused, next] = proxy.calls.slice(from).filter((c) => c.url.startsWith('/api/v1/namespaces?'));
      t.equal(refused?.status, 429);
      // Backoff alone would retry after 125–250 ms.
      t.ok(next!.t - refused!.t >= 1_900, `relisted ${next!.t - refused!.t} ms after a Retry-After: 2`);
    } finally {
      await informer.stop();
    }
    const start = proxy.calls.length;
    proxy.throttleNext(2, 1, '/api/v1/namespaces/default');
    await client.get('/api/v1/namespaces/default', { retries: 3 });
    const tries = proxy.calls.slice(start).filter((c) => c.url === '/api/v1/namespaces/default');
    t.strictSame(
      tries.map((s) => s.status),
      [429, 429, 200],
    );
    t.ok(tries[1]!.t - tries[0]!.t >= 900 && tries[2]!.t - tries[1]!.t >= 900, JSON.stringify(tries));
    client.close();
  },
);
