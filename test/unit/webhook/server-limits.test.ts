// Issue 13 item 4: the server under big bodies, slow clients and its own shutdown (inject() and the
// server's own settings; the two-replica rollout is the e2e's job).
import t from 'tap';
import { baseOptions, silent } from '../../../lab/fake/webhook.ts';
import { Registry } from '../../../shared/metrics.ts';
import { createWebhookApp } from '../../../webhook/server.ts';
import { review, speakerPod } from './fixtures.ts';

const MiB = 1024 * 1024;

t.test(
  'a body over 3 MiB (the API server sends at most 3 MiB) is 413, and the server keeps serving',
  async (t) => {
    const app = createWebhookApp({ planner: () => baseOptions(), log: silent(), metrics: new Registry() });
    const big = review(speakerPod()) as { request: { object: { metadata: { annotations?: object } } } };
    big.request.object.metadata.annotations = { pad: 'x'.repeat(3 * MiB) };
    const res = await app.inject({ method: 'POST', url: '/mutate', payload: JSON.stringify(big) });
    t.equal(res.statusCode, 413);
    const ok = await app.inject({ method: 'POST', url: '/mutate', payload: review(speakerPod()) });
    t.equal(ok.statusCode, 200);
    await app.close();
  },
);

t.test('header, request and idle timeouts and a connection cap are set', async (t) => {
  const app = createWebhookApp({ planner: () => baseOptions(), log: silent(), metrics: new Registry() });
  await app.ready();
  const s = app.server as unknown as {
    requestTimeout: number;
    headersTimeout: number;
    timeout: number;
    keepAliveTimeout: number;
    maxConnections?: number;
  };
  t.ok(s.requestTimeout > 0 && s.requestTimeout <= 30_000, `requestTimeout ${s.requestTimeout}`);
  t.ok(s.headersTimeout > 0 && s.headersTimeout <= 10_000, `headersTimeout ${s.headersTimeout}`);
  t.ok(s.timeout > 0 && s.timeout <= 120_000, `connectionTimeout ${s.timeout}`);
  t.ok(s.keepAliveTimeout > 0, 'keepAliveTimeout');
  t.ok(typeof s.maxConnections === 'number' && s.maxConnections > 0, 'maxConnections');
  await app.close();
});

t.test('draining: readiness goes false, admissions are still answered, keep-alive is ended', async (t) => {
  let draining = false;
  const app = createWebhookApp({
    planner: () => baseOptions(),
    log: silent(),
    metrics: new Registry(),
    draining: () => draining,
  });
  t.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
  draining = true;
  t.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 503);
  const res = await app.inject({ method: 'POST', url: '/mutate', payload: review(speakerPod()) });
  t.equal(res.statusCode, 200);
  t.equal(res.headers.connection, 'close');
  await app.close();
});
