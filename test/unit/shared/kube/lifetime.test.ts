// The sidecar's client has a lifetime: when the grace period after SIGTERM is spent, every request
// in flight ends, none is retried or started, and none of it counts as the API being down.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { KubeClient } from '../../../../shared/kube/client.ts';

/** A black hole (requests arrive and are never answered) and a client of it whose outcomes are recorded. */
async function blackHole(t: Test, lifetime?: AbortSignal) {
  const seen = { arrived: 0 };
  const server = http.createServer(() => {
    seen.arrived++;
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const agent = new http.Agent();
  const results: boolean[] = [];
  const client = new KubeClient(
    {
      server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      apply: async () => ({ agent, headers: {} }),
      close: () => agent.destroy(),
    },
    { ...(lifetime ? { signal: lifetime } : {}), onResult: (ok) => results.push(ok) },
  );
  t.teardown(() => client.close());
  return { seen, results, client };
}

t.test('aborting the lifetime ends requests in flight and their retries at once', async (t) => {
  const lifetime = new AbortController();
  const { seen, results, client } = await blackHole(t, lifetime.signal);
  const started = Date.now();
  const pending = client.create('/api/v1/namespaces/default/events', {}, { retries: 3, timeoutMs: 3_000 });
  const watch = client.watch('/api/v1/nodes', {}, () => {}, new AbortController().signal);
  while (seen.arrived < 2) await new Promise((r) => setTimeout(r, 10));
  lifetime.abort();
  await t.rejects(pending, { name: 'ApiError', reason: 'Aborted' });
  await watch;
  t.ok(Date.now() - started < 2_000, `ended ${Date.now() - started} ms after it began (not after 4 × 3 s)`);
  await t.rejects(
    client.get('/api/v1/nodes/a'),
    { name: 'ApiError', reason: 'Aborted' },
    'nothing starts after it',
  );
  t.equal(seen.arrived, 2, 'no retry and no new request reached the server');
  t.strictSame(results, [], 'an abandoned request says nothing about the API');
});

t.test(
  'a request its caller abandons (its own signal) is not retried and says nothing about the API',
  async (t) => {
    const { seen, results, client } = await blackHole(t);
    const caller = new AbortController();
    const pending = client.get('/api/v1/nodes/a', { retries: 3, timeoutMs: 3_000, signal: caller.signal });
    const deadline = Date.now() + 5_000;
    while (seen.arrived < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    caller.abort();
    await t.rejects(pending, { name: 'ApiError', reason: 'Aborted' });
    t.equal(seen.arrived, 1, 'not retried');
    t.strictSame(results, [], 'not counted as the API failing (the fail-safe abandons reads this way)');
  },
);
