import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createLogger } from '../../../shared/log.ts';
import { Registry } from '../../../shared/metrics.ts';
import { SidecarServer } from '../../../sidecar/http.ts';

let server: SidecarServer;
let base: string;
let prestops = 0;

before(async () => {
  server = new SidecarServer({
    port: 0,
    host: '127.0.0.1',
    log: createLogger('test', 'silent'),
    metrics: new Registry(),
    ready: () => true,
    prestop: async () => {
      prestops++;
      return { done: true };
    },
  });
  const addr = await server.listen();
  base = `http://127.0.0.1:${addr.port}`;
});
after(() => server.close());

test('a kubelet before 1.26 asks for //prestop: it is the preStop hook, not a 404', async () => {
  // fetch would normalise the URL; send the request line exactly as kubelet 1.20 does.
  const { request } = await import('node:http');
  const status = await new Promise<number>((resolve, reject) => {
    const req = request(`${base}/`, { path: '//prestop', method: 'GET' }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
  assert.equal(status, 200);
  assert.equal(prestops, 1);
});

test('unknown paths still get a 404 naming the routes', async () => {
  const r = await fetch(`${base}/nope`);
  assert.equal(r.status, 404);
  assert.match(await r.text(), /routes are \/healthz \/readyz \/prestop \/metrics/);
});

test('profiles without a preStop hook do not serve /prestop (no door for other pods)', async () => {
  const bare = new SidecarServer({
    port: 0,
    host: '127.0.0.1',
    log: createLogger('test', 'silent'),
    metrics: new Registry(),
    ready: () => true,
  });
  const { port } = await bare.listen();
  try {
    const r = await fetch(`http://127.0.0.1:${port}/prestop`);
    assert.equal(r.status, 404);
    assert.match(await r.text(), /no \/prestop for this profile/);
  } finally {
    await bare.close();
  }
});
