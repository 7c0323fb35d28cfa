// The sidecar runs on every node, so what its modules pull in at start is paid once per node.
// An ESM default import of `node:http` makes Node evaluate every export of the module, and
// http's lazy WebSocket/CloseEvent/MessageEvent getters then load undici, http2, zlib and
// perf_hooks: ~8 MiB of RSS for nothing the sidecar uses (measured with `make bench-sidecar`).
import { spawnSync } from 'node:child_process';
import t from 'tap';

const ROOT = new URL('../../..', import.meta.url).pathname;
/** Internal modules no sidecar code needs; any of them means an import drags them in. */
const UNWANTED = /^NativeModule (internal\/deps\/undici\/undici|http2|zlib|perf_hooks)$/;

function loadedBy(modules: string[]): string[] {
  const code = `const before = new Set(process.moduleLoadList);
for (const m of ${JSON.stringify(modules)}) await import(${JSON.stringify(ROOT)} + m);
process.stdout.write(JSON.stringify(process.moduleLoadList.filter((m) => !before.has(m))));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`node exited ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout) as string[];
}

t.test('loading the sidecar and its API client loads no undici, http2, zlib or perf_hooks', async (t) => {
  const loaded = loadedBy([
    'sidecar/main.ts',
    'shared/kube/client.ts',
    'shared/kube/in-cluster.ts',
    'sidecar/http.ts',
  ]);
  t.ok(
    loaded.some((m) => m === 'NativeModule http'),
    'node:http itself is loaded (the probe ran)',
  );
  t.same(
    loaded.filter((m) => UNWANTED.test(m)),
    [],
    'no module the sidecar does not use',
  );
});
