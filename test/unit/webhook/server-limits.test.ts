// Issue 13 item 4: the server under big bodies, slow clients and its own shutdown (inject() and the
// server's own settings; the two-replica rollout is the e2e's job).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from '../../../shared/metrics.ts';
import { createWebhookApp } from '../../../webhook/server.ts';
import { review, speakerPod } from './fixtures.ts';
import { baseOptions, silent } from './helpers.ts';

const MiB = 1024 * 1024;

test('a body over 3 MiB (the API server sends at most 3 MiB) is 413, and the server keeps serving', async () => {
  const app = createWebhookApp({ planner: () => baseOptions(), log: silent(), metrics: new Registry() });
  const big = review(speakerPod()) as { request: { object: { metadata: { annotations?: object } } } };
  big.request.object.metadata.annotations = { pad: 'x'.repeat(3 * MiB) };
  const res = await app.inject({ method: 'POST', url: '/mutate', payload: JSON.stringify(big) });
  assert.equal(res.statusCode, 413);
  const ok = await app.inject({ method: 'POST', url: '/mutate', payload: review(speakerPod()) });
  assert.equal(ok.statusCode, 200);
  await app.close();
});

test('header, request and idle timeouts and a connection cap are set', async () => {
  const app = createWebhookApp({ planner: () => baseOptions(), log: silent(), metrics: new Registry() });
  await app.ready();
  const s = app.server as unknown as {
    requestTimeout: number;
    headersTimeout: number;
    timeout: number;
    keepAliveTimeout: number;
    maxConnections?: number;
  };
  assert.ok(s.requestTimeout > 0 && s.requestTimeout <= 30_000, `requestTimeout ${s.requestTimeout}`);
  assert.ok(s.headersTimeout > 0 && s.headersTimeout <= 10_000, `headersTimeout ${s.headersTimeout}`);
  assert.ok(s.timeout > 0 && s.timeout <= 120_000, `connectionTimeout ${s.timeout}`);
  assert.ok(s.keepAliveTimeout > 0, 'keepAliveTimeout');
  assert.ok(typeof s.maxConnections === 'number' && s.maxConnections > 0, 'maxConnections');
  await app.close();
});

test('draining: readiness goes false, admissions are still answered, keep-alive is ended', async () => {
  let draining = false;
  const app = createWebhookApp({
    planner: () => baseOptions(),
    log: silent(),
    metrics: new Registry(),
    draining: () => draining,
  });
  assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
  draining = true;
  assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 503);
  const res = await app.inject({ method: 'POST', url: '/mutate', payload: review(speakerPod()) });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers.connection, 'close');
  await app.close();
});
