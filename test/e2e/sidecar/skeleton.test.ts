// The sidecar process against the real API server: health and readiness
// never depend on the API, bad configuration is a clear exit 2, SIGTERM is a clean exit.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import { type ControlPlane, freePort, startControlPlane } from '../../../lab/control-plane.ts';
import { waitFor } from '../../../shared/clock.ts';

const cli = new URL('../../../cli/drainguard.ts', import.meta.url).pathname;
let cp: ControlPlane;

before(async () => {
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
after(async () => {
  await cp?.stop();
});

function startSidecar(
  port: number,
  extra: Record<string, string> = {},
): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, [cli, 'sidecar'], {
    env: {
      PATH: process.env.PATH,
      KUBECONFIG: cp.kubeconfigPath,
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
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  return { child, output: () => out };
}

const get = async (port: number, path: string) => {
  try {
    const r = await fetch(`http://127.0.0.1:${port}${path}`);
    return r.status;
  } catch {
    return 0;
  }
};

test('bad configuration exits 2 naming the variable', async () => {
  const { child, output } = startSidecar(await freePort(), { DRAINGUARD_PORT: 'eighty' });
  const code = await new Promise((r) => child.once('exit', r));
  assert.equal(code, 2);
  assert.match(output(), /DRAINGUARD_PORT="eighty": accepted is a whole number/);
});

test('ready while running, still ready with the API server down, clean exit on SIGTERM', async () => {
  const port = await freePort();
  const { child, output } = startSidecar(port);
  const exited = new Promise<number | null>((r) => child.once('exit', r));
  try {
    await waitFor('/readyz 200', async () => (await get(port, '/readyz')) === 200, { timeoutMs: 20_000 });
    assert.equal(await get(port, '/healthz'), 200);
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
    assert.equal(await get(port, '/readyz'), 200);
    assert.equal(await get(port, '/healthz'), 200);
    await cp.startApiServer();
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
    assert.match(output(), /"msg":"shutting down"/);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
});
