// make bench-sidecar: the sidecar as it ships (dist/drainguard.mjs, with the node flags it is
// launched with, API access as in a pod: service account, no kubeconfig) against a local control
// plane: time to /readyz, RSS after 10 s idle, next to a bare `node -e` and next to a bundle of
// @kubernetes/client-node's KubeConfig + Watch alone (one field-selected watch, same flags),
// measured in the same run. That last figure is why the sidecar keeps its own lean in-cluster
// client (docs/architecture.md). Fails (exit 1) when the sidecar idles above RSS_LIMIT_MIB.
// Last line: one JSON object.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { startControlPlane } from '../../../lab/bed/control-plane.ts';
import { podAccess } from '../../../lab/bed/pod.ts';
import { waitFor } from '../../../shared/clock.ts';
import { SIDECAR_COMMAND } from '../../../webhook/plan/sidecar.ts';

/** The flags the sidecar container runs node with: the injected command's, between node and the bundle. */
export const SIDECAR_NODE_FLAGS = SIDECAR_COMMAND.slice(1, SIDECAR_COMMAND.indexOf('/app/drainguard.mjs'));
// BENCH_NODE_FLAGS="" measures without them (for comparison).
const flags =
  process.env.BENCH_NODE_FLAGS === undefined
    ? SIDECAR_NODE_FLAGS
    : process.env.BENCH_NODE_FLAGS.split(' ').filter(Boolean);
const IDLE_MS = 10_000;
/** The sidecar runs on every node: its idle RSS must stay at or below this. */
const RSS_LIMIT_MIB = 60;
const ROOT = new URL('../../..', import.meta.url).pathname;
const bundle = `${ROOT}dist/drainguard.mjs`;
if (!existsSync(bundle)) throw new Error(`${bundle} missing: run make build first`);
const note = (msg: string) => process.stderr.write(`[bench-sidecar] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const rssMiB = (pid: number) => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
};
const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
const stop = (p: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (p.exitCode !== null) return resolve();
    p.once('exit', () => resolve());
    p.kill('SIGKILL');
  });

// Own state dir: see lab/bed/l2-scene.ts (reapLeftovers race on drainguard-cp-* dirs).
const cpDir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'drainguard-l2-'));
const cp = await startControlPlane({ dir: cpDir });
const client = cp.client();
let sidecar: ChildProcess | undefined;
let bare: ChildProcess | undefined;
let clientNode: ChildProcess | undefined;
// client-node bundled as the sidecar is (esbuild, ESM, a require() shim for CommonJS parts).
const clientNodeBundle = join(cpDir, 'client-node-watch.mjs');
await build({
  stdin: {
    contents: `import { KubeConfig, Watch } from '@kubernetes/client-node';
const kc = new KubeConfig();
kc.loadFromFile(process.env.KC);
await new Watch(kc).watch('/api/v1/nodes', { fieldSelector: 'metadata.name=bench-node' }, (type) => process.stderr.write('[client-node] ' + type + '\\n'), (err) => err && process.stderr.write('[client-node] watch ended: ' + err + '\\n'));
setInterval(() => {}, 1000);`,
    resolveDir: ROOT,
    loader: 'ts',
  },
  outfile: clientNodeBundle,
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node24',
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: 'none',
  logLevel: 'error',
  banner: {
    js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
  },
});
try {
  await client.create('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: 'bench-node' } });
  await client.create('/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: 'metallb-system' },
  });
  await client.create('/api/v1/namespaces/metallb-system/pods', {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'speaker-bench', namespace: 'metallb-system' },
    spec: { nodeName: 'bench-node', containers: [{ name: 'speaker', image: 'metallb/speaker' }] },
  });
  const port = await freePort();
  bare = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  clientNode = spawn(process.execPath, [...flags, clientNodeBundle], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { PATH: process.env.PATH, KC: cp.kubeconfigPath },
  });
  const t0 = performance.now();
  // As in a pod: the service account, no kubeconfig (which would load @kubernetes/client-node).
  const pod = podAccess(cp);
  const [bin, ...args] = pod.wrap([process.execPath, ...flags, bundle, 'sidecar']) as [string, ...string[]];
  sidecar = spawn(bin, args, {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      PATH: process.env.PATH,
      ...pod.env,
      DRAINGUARD_PROFILE: 'metallb-speaker',
      DRAINGUARD_FEATURES: 'l2-handover',
      DRAINGUARD_POD_NAME: 'speaker-bench',
      DRAINGUARD_POD_NAMESPACE: 'metallb-system',
      DRAINGUARD_NODE_NAME: 'bench-node',
      DRAINGUARD_PORT: String(port),
      DRAINGUARD_BIND_ADDRESS: '127.0.0.1',
      // Nothing will be changed (the node is never cordoned); observe-only makes sure of it.
      DRAINGUARD_OBSERVE_ONLY: 'true',
    },
  });
  const proc = sidecar;
  await waitFor(
    'sidecar /readyz',
    async () => {
      if (proc.exitCode !== null) throw new Error(`sidecar exited with ${proc.exitCode}`);
      return (await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(500) })).ok;
    },
    { timeoutMs: 30_000, intervalMs: 10 },
  );
  const readyS = (performance.now() - t0) / 1000;
  note(`ready after ${readyS.toFixed(3)} s; idling ${IDLE_MS / 1000} s`);
  await sleep(IDLE_MS);
  const rss = rssMiB(proc.pid ?? 0);
  const bareRss = rssMiB(bare.pid ?? 0);
  if (clientNode.exitCode !== null)
    throw new Error(`the client-node bundle exited with ${clientNode.exitCode}`);
  const clientNodeRss = rssMiB(clientNode.pid ?? 0);
  const r1 = (x: number) => Math.round(x * 10) / 10;
  process.stdout.write(
    `${JSON.stringify({
      bench: 'sidecar',
      rss_mib: r1(rss),
      rss_limit_mib: RSS_LIMIT_MIB,
      within_limit: rss <= RSS_LIMIT_MIB,
      bare_node_rss_mib: r1(bareRss),
      client_node_watch_rss_mib: r1(clientNodeRss),
      rss_ratio_to_bare: r1(rss / bareRss),
      client_node_ratio_to_bare: r1(clientNodeRss / bareRss),
      ready_s: Math.round(readyS * 1000) / 1000,
      node_flags: flags.join(' '),
    })}\n`,
  );
  if (rss > RSS_LIMIT_MIB) {
    note(`the sidecar idles at ${r1(rss)} MiB, above the ${RSS_LIMIT_MIB} MiB limit`);
    process.exitCode = 1;
  }
} finally {
  if (sidecar) await stop(sidecar);
  if (bare) await stop(bare);
  if (clientNode) await stop(clientNode);
  client.close();
  await cp.stop();
  rmSync(cpDir, { recursive: true, force: true });
}
