// The sidecar process against the real API server: health and readiness
// never depend on the API, bad configuration is a clear exit 2, SIGTERM is a clean exit, in a
// pod (service account, no kubeconfig) it authenticates with the mounted token, and on the host
// network /metrics alone is served on the node's address.
import t from 'tap';
import { type ControlPlane, freePort, startControlPlane } from '../../../lab/bed/control-plane.ts';
import { type PodAccess, podAccess } from '../../../lab/bed/pod.ts';
import { START_DEADLINE_MS } from '../../../lab/bed/proc.ts';
import { waitFor } from '../../../shared/clock.ts';
import { httpStatus, type SidecarProcess, spawnSidecar } from './process.ts';

let cp: ControlPlane;

t.before(async () => {
  cp = await startControlPlane();
  await cp
    .client()
    .create('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: 'sk-node' } });
  await cp.client().create('/api/v1/namespaces/default/pods', {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'sk-pod' },
    spec: { nodeName: 'sk-node', containers: [{ name: 'c', image: 'x' }] },
  });
});
t.teardown(async () => {
  await cp?.stop();
});

function startSidecar(port: number, extra: Record<string, string> = {}, pod?: PodAccess): SidecarProcess {
  return spawnSidecar(
    {
      PATH: process.env.PATH,
      ...(pod ? pod.env : { KUBECONFIG: cp.kubeconfigPath }),
      DRAINGUARD_PROFILE: 'netfilter-cleanup',
      DRAINGUARD_FEATURES: 'netfilter-cleanup',
      DRAINGUARD_POD_NAME: 'sk-pod',
      DRAINGUARD_POD_NAMESPACE: 'default',
      DRAINGUARD_NODE_NAME: 'sk-node',
      DRAINGUARD_PORT: String(port),
      DRAINGUARD_BIND_ADDRESS: '127.0.0.1',
      DRAINGUARD_CLEANUP_DRY_RUN: 'true',
      DRAINGUARD_OBSERVE_ONLY: 'true',
      ...extra,
    },
    pod?.wrap,
  );
}

const get = httpStatus;

t.test('bad configuration exits 2 naming the variable', async (t) => {
  const { child, output } = startSidecar(await freePort(), { DRAINGUARD_PORT: 'eighty' });
  const code = await new Promise((r) => child.once('exit', r));
  t.equal(code, 2);
  t.match(output(), /DRAINGUARD_PORT="eighty": accepted is a whole number/);
});

t.test('ready while running, still ready with the API server down, clean exit on SIGTERM', async (t) => {
  const port = await freePort();
  const { child, output } = startSidecar(port);
  const exited = new Promise<number | null>((r) => child.once('exit', r));
  try {
    await waitFor('/readyz 200', async () => (await get(port, '/readyz')) === 200, {
      timeoutMs: START_DEADLINE_MS,
    });
    t.equal(await get(port, '/healthz'), 200);
    await cp.stopApiServer();
    // The sidecar notices (its watches break and relists are refused) and must stay ready regardless.
    await waitFor('watch failure logged', () => output().includes('watch failed'), { timeoutMs: 20_000 });
    await waitFor(
      'unreachable API counted',
      async () =>
        /drainguard_api_errors_total\{code="0"\} [1-9]/.test(
          await (await fetch(`http://127.0.0.1:${port}/metrics`)).text(),
        ),
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    t.equal(await get(port, '/readyz'), 200);
    t.equal(await get(port, '/healthz'), 200);
    await cp.startApiServer();
    child.kill('SIGTERM');
    t.equal(await exited, 0);
    t.match(output(), /"msg":"shutting down"/);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
});

const metrics = async (port: number) => {
  try {
    return await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  } catch {
    return '';
  }
};

t.test(
  'in a pod: the mounted service-account token authenticates (no kubeconfig); a wrong one is a 401',
  async (t) => {
    const port = await freePort();
    const { child, output } = startSidecar(port, {}, podAccess(cp));
    const bad = await freePort();
    const refused = startSidecar(bad, {}, podAccess(cp, 'not-a-token'));
    try {
      await waitFor('/readyz 200', async () => (await get(port, '/readyz')) === 200, {
        timeoutMs: START_DEADLINE_MS,
      });
      // The drain watcher's Node watch sees the cordon: the API answered with the token.
      await cp.client().patch('/api/v1/nodes/sk-node', { spec: { unschedulable: true } }, 'merge');
      await waitFor('cordon seen', () => /"drain state changed"/.test(output()) && /cordon/.test(output()), {
        timeoutMs: 20_000,
      });
      t.notMatch(await metrics(port), /drainguard_api_errors_total\{code="401"\}/);
      await waitFor(
        'the wrong token refused',
        async () => /drainguard_api_errors_total\{code="401"\} [1-9]/.test(await metrics(bad)),
        { timeoutMs: 20_000, intervalMs: 200 },
      );
    } finally {
      await cp.client().patch('/api/v1/nodes/sk-node', { spec: { unschedulable: false } }, 'merge');
      for (const c of [child, refused.child]) if (c.exitCode === null) c.kill('SIGKILL');
    }
  },
);

/** Status and body of a request to `host:port`, or status 0 when nothing answers. */
const request = async (host: string, port: number, path: string, method = 'GET') => {
  try {
    const r = await fetch(`http://${host}:${port}${path}`, { method });
    return { status: r.status, body: await r.text() };
  } catch {
    return { status: 0, body: '' };
  }
};

t.test(
  "hostNetwork: /metrics alone on the node's address, every other route only on 127.0.0.1",
  async (t) => {
    const port = await freePort();
    const metricsPort = await freePort();
    // 127.0.0.2 stands for the node's IP (status.hostIP): an address beside the loopback one.
    const { child, output } = startSidecar(port, {
      DRAINGUARD_METRICS_PORT: String(metricsPort),
      DRAINGUARD_METRICS_ADDRESS: '127.0.0.2',
    });
    try {
      await waitFor('/readyz 200', async () => (await get(port, '/readyz')) === 200, {
        timeoutMs: START_DEADLINE_MS,
      });
      const scraped = await request('127.0.0.2', metricsPort, '/metrics');
      t.equal(scraped.status, 200);
      t.match(scraped.body, /^# TYPE drainguard_api_view_synced gauge$/m);
      for (const path of ['/prestop', '/readyz', '/healthz', '/status'])
        for (const method of ['GET', 'POST'])
          t.equal((await request('127.0.0.2', metricsPort, path, method)).status, 404, `${method} ${path}`);
      t.equal((await request('127.0.0.1', metricsPort, '/metrics')).status, 0, 'not on loopback');
      t.equal((await request('127.0.0.2', port, '/readyz')).status, 0, 'the main listener is not there');
      t.match(output(), new RegExp(`"metrics":"127\\.0\\.0\\.2:${metricsPort}"`));
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  },
);

t.test('hostNetwork: a metrics port held by another process is logged; the sidecar runs on', async (t) => {
  const { createServer } = await import('node:net');
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.2', resolve));
  const held = (holder.address() as { port: number }).port;
  const port = await freePort();
  const { child, output } = startSidecar(port, {
    DRAINGUARD_METRICS_PORT: String(held),
    DRAINGUARD_METRICS_ADDRESS: '127.0.0.2',
  });
  try {
    await waitFor('/readyz 200', async () => (await get(port, '/readyz')) === 200, {
      timeoutMs: START_DEADLINE_MS,
    });
    t.match(output(), /"msg":"\/metrics cannot listen on the node: not served there"/);
    t.match(output(), /EADDRINUSE/);
    t.equal(await get(port, '/metrics'), 200, 'still served on loopback');
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    holder.close();
  }
});
