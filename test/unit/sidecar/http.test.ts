import t from 'tap';
import { createLogger } from '../../../shared/log.ts';
import { Registry } from '../../../shared/metrics.ts';
import { SidecarServer } from '../../../sidecar/http.ts';

let server: SidecarServer;
let base: string;
let prestops = 0;

t.before(async () => {
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
t.teardown(() => server.close());

t.test('a kubelet before 1.26 asks for //prestop: it is the preStop hook, not a 404', async (t) => {
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
  t.equal(status, 200);
  t.equal(prestops, 1);
});

t.test('unknown paths still get a 404 naming the routes', async (t) => {
  const r = await fetch(`${base}/nope`);
  t.equal(r.status, 404);
  t.match(await r.text(), /routes are \/healthz \/readyz \/prestop \/metrics/);
});

t.test('profiles without a preStop hook do not serve /prestop (no door for other pods)', async (t) => {
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
    t.equal(r.status, 404);
    t.match(await r.text(), /no \/prestop for this profile/);
  } finally {
    await bare.close();
  }
});

t.test("the hostNetwork /metrics listener (the node's IP) serves /metrics and nothing else", async (t) => {
  let prestopped = 0;
  const metrics = new Registry();
  metrics.gauge('drainguard_api_view_synced', 'test').set({}, 1);
  // 127.0.0.2: an address of its own, as the node's IP is beside the main listener's 127.0.0.1.
  const node = new SidecarServer({
    port: 0,
    host: '127.0.0.2',
    log: createLogger('test', 'silent'),
    metrics,
    ready: () => true,
    prestop: async () => {
      prestopped++;
      return { done: true };
    },
    serves: 'metrics',
  });
  const { port, address } = await node.listen();
  t.equal(address, '127.0.0.2');
  try {
    const m = await fetch(`http://127.0.0.2:${port}/metrics`);
    t.equal(m.status, 200);
    t.match(await m.text(), /^drainguard_api_view_synced 1$/m);
    for (const path of ['/prestop', '//prestop', '/readyz', '/healthz', '/status', '/']) {
      for (const method of ['GET', 'POST']) {
        const r = await fetch(`http://127.0.0.2:${port}${path}`, { method });
        t.equal(r.status, 404, `${method} ${path}`);
        t.match(await r.text(), /only \/metrics is served on this address/, `${method} ${path}`);
      }
    }
    t.equal(prestopped, 0, 'the preStop work never ran');
    // Not on loopback: only the address it was given.
    await t.rejects(fetch(`http://127.0.0.1:${port}/metrics`));
  } finally {
    await node.close();
  }
});
