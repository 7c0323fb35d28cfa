// SIGTERM as the kubelet sends it, to the sidecar process, when the API server does not answer:
// - during a start-up that has not finished (a tool that hangs, an API server that never answers)
//   the signal is handled: a clean exit, saying so — never the default death by signal;
// - retries never outlive the grace period: with the own Pod unknown the grace is taken to be the
//   handover budget, and the process has exited by then.
// No API server is needed: the kubeconfig names a black hole (connections accepted, never answered).
import type { ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import t from 'tap';
import { freePort, kubeconfigJson } from '../../../lab/bed/control-plane.ts';
import { START_DEADLINE_MS } from '../../../lab/bed/proc.ts';
import { waitFor } from '../../../shared/clock.ts';
import { httpStatus, type SidecarProcess, spawnSidecar } from './process.ts';

let dir: string;
let blackhole: net.Server;
let kubeconfig: string;
const sockets = new Set<net.Socket>();

t.before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dg-sigterm-'));
  blackhole = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
  });
  await new Promise<void>((r) => blackhole.listen(0, '127.0.0.1', r));
  const port = (blackhole.address() as net.AddressInfo).port;
  kubeconfig = join(dir, 'kubeconfig.json');
  // insecure-skip-tls-verify is not needed: no TLS handshake ever completes.
  writeFileSync(kubeconfig, kubeconfigJson(`https://127.0.0.1:${port}`, '', 'u', 'not-a-secret'));
  // An `ebtables` that hangs (a host tool stuck on a lock): the netfilter
  // feature's start-up waits for it.
  writeFileSync(join(dir, 'ebtables'), '#!/bin/sh\nexec sleep 60\n');
  chmodSync(join(dir, 'ebtables'), 0o755);
});
t.teardown(() => {
  for (const s of sockets) s.destroy();
  blackhole.close();
  rmSync(dir, { recursive: true, force: true });
});

function sidecar(port: number, env: Record<string, string>): SidecarProcess {
  return spawnSidecar({
    PATH: `${dir}:${dirname(process.execPath)}:/usr/bin:/bin`,
    KUBECONFIG: kubeconfig,
    DRAINGUARD_POD_NAME: 'st-pod',
    DRAINGUARD_POD_NAMESPACE: 'default',
    DRAINGUARD_NODE_NAME: 'st-node',
    DRAINGUARD_PORT: String(port),
    DRAINGUARD_BIND_ADDRESS: '127.0.0.1',
    ...env,
  });
}

const status = httpStatus;

const exit = (child: ChildProcess) =>
  new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((r) =>
    child.once('exit', (code, signal) => r({ code, signal, at: Date.now() })),
  );

t.test('SIGTERM during a start-up that has not finished: a clean, prompt exit that says so', async (t) => {
  const port = await freePort();
  const { child, output } = sidecar(port, {
    DRAINGUARD_PROFILE: 'netfilter-cleanup',
    DRAINGUARD_FEATURES: 'netfilter-cleanup',
    DRAINGUARD_CLEANUP_DRY_RUN: 'true',
  });
  const exited = exit(child);
  try {
    // Serving /healthz but not ready: the features' start-up is under way (ebtables hangs).
    await waitFor('start-up under way', async () => (await status(port, '/healthz')) === 200, {
      timeoutMs: 20_000,
    });
    t.equal(await status(port, '/readyz'), 503, 'not ready: start-up has not finished');
    const sent = Date.now();
    child.kill('SIGTERM');
    const r = await Promise.race([
      exited,
      new Promise<undefined>((res) => setTimeout(res, 8_000, undefined)),
    ]);
    t.ok(r, `exited within 8 s of SIGTERM (${output().slice(-400)})`);
    t.strictSame(
      { code: r?.code, signal: r?.signal },
      { code: 0, signal: null },
      'a clean exit, not death by signal',
    );
    t.ok((r?.at ?? Infinity) - sent < 5_000, `prompt: ${(r?.at ?? Infinity) - sent} ms`);
    t.match(output(), /"msg":"SIGTERM during start-up: shutting down what has started"/);
    t.match(output(), /"msg":"shutting down"/);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});

t.test('retries end with the grace period: the Lease handover against a silent API server', async (t) => {
  const port = await freePort();
  // The own Pod cannot be read: the grace period is taken to be the handover budget (the webhook
  // raises terminationGracePeriodSeconds to cover it).
  const budgetSeconds = 5;
  const { child, output } = sidecar(port, {
    DRAINGUARD_PROFILE: 'lease',
    DRAINGUARD_FEATURES: 'lease-handover',
    DRAINGUARD_LEASES: 'leader',
    DRAINGUARD_GUARDED_CONTAINER: 'app',
    DRAINGUARD_HANDOVER_BUDGET_SECONDS: String(budgetSeconds),
    DRAINGUARD_LEADER_STOP_TIMEOUT_SECONDS: '1',
  });
  const exited = exit(child);
  try {
    await waitFor('ready', async () => (await status(port, '/readyz')) === 200, {
      timeoutMs: START_DEADLINE_MS,
    });
    const sent = Date.now();
    child.kill('SIGTERM');
    const r = await Promise.race([
      exited,
      new Promise<undefined>((res) => setTimeout(res, 30_000, undefined)),
    ]);
    const took = (r?.at ?? Infinity) - sent;
    t.ok(
      took <= budgetSeconds * 1000,
      `exited ${took} ms after SIGTERM, within the ${budgetSeconds} s grace period`,
    );
    t.strictSame({ code: r?.code, signal: r?.signal }, { code: 0, signal: null });
    t.match(output(), /"msg":"Lease handover finished"/, 'the handover ended (given up), not cut off');
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});
