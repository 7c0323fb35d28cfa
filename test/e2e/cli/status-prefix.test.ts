// `drainguard status` against an API server behind a path prefix, as Rancher serves each cluster
// (`https://rancher.example/k8s/clusters/<id>`): every request must go under the prefix.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { type ControlPlane, kubeconfigJson, sharedControlPlane } from '../../../lab/bed/control-plane.ts';
import { START_DEADLINE_MS, sh } from '../../../lab/bed/proc.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import { type ApiProxy, apiProxy } from '../bed/api-proxy.ts';

const CLI = new URL('../../../cli/drainguard.ts', import.meta.url).pathname;
const PREFIX = '/k8s/clusters/c-m-prefix';
let cp: ControlPlane;
let client: KubeClient;
let proxy: ApiProxy;

t.before(async () => {
  cp = await sharedControlPlane();
  client = cp.client();
  proxy = await apiProxy(cp, { pathPrefix: PREFIX });
});
t.teardown(async () => {
  client.close();
  await proxy.close();
});

t.test('status reads the cluster through a server URL with a path', async (t) => {
  await client.create('/api/v1/nodes', {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'prefix-a' },
  });
  t.teardown(() => client.delete('/api/v1/nodes/prefix-a').catch(() => {}));
  const kubeconfig = join(cp.dir, 'kubeconfig-prefix.json');
  writeFileSync(
    kubeconfig,
    kubeconfigJson(proxy.server, cp.target.ca ?? '', 'admin', cp.target.token ?? ''),
    {
      mode: 0o600,
    },
  );
  t.match(proxy.server, new RegExp(`${PREFIX}$`));
  const r = await sh(
    [process.execPath, CLI, 'status', '-o', 'json', '--kubeconfig', kubeconfig, 'prefix-a'],
    {
      timeoutMs: START_DEADLINE_MS,
    },
  );
  t.equal(r.code, 0, r.stderr);
  const nodes = (JSON.parse(r.stdout || '{}') as { nodes?: { node: string }[] }).nodes ?? [];
  t.strictSame(
    nodes.map((n) => n.node),
    ['prefix-a'],
  );
  const asked = proxy.calls.map((c) => c.url);
  t.ok(asked.length > 0, 'the CLI went through the proxy');
  t.ok(
    asked.some((u) => u.startsWith('/api/v1/nodes')),
    `the Node list reached the API server (asked: ${asked.join(', ')})`,
  );
});
