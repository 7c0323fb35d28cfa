import t from 'tap';
import { type ControlPlane, startControlPlane } from '../../../lab/bed/control-plane.ts';
import { KUBERNETES_VERSION } from '../../../lab/versions.ts';
import { waitFor } from '../../../shared/clock.ts';
import { Informer } from '../../../shared/kube/informer.ts';
import type { Lease, Node } from '../../../shared/kube/types.ts';
import { microTime } from '../../../shared/kube/types.ts';
import { createLogger } from '../../../shared/log.ts';
import { oneNodeInformer } from './one-node.ts';

let cp: ControlPlane;
t.before(async () => {
  cp = await startControlPlane();
});
t.teardown(async () => {
  await cp?.stop();
});

t.test("kubectl sees the server at lab/versions.env's version, and is that version itself", async (t) => {
  const r = await cp.kubectl(['version', '-o', 'json']);
  const v = JSON.parse(r.stdout) as {
    serverVersion: { gitVersion: string };
    clientVersion: { gitVersion: string };
  };
  t.equal(v.serverVersion.gitVersion, `v${KUBERNETES_VERSION}`);
  t.equal(v.clientVersion.gitVersion, `v${KUBERNETES_VERSION}`);
});

t.test('client-node KubeConfig talks to it too', async (t) => {
  const { CoreV1Api } = await import('@kubernetes/client-node');
  const api = (await cp.kubeConfig()).makeApiClient(CoreV1Api);
  const ns = await api.readNamespace({ name: 'default' });
  t.equal(ns.metadata?.name, 'default');
});

t.test('kubectl cordon is observed through a field-selected watch', async (t) => {
  const client = cp.client();
  await client.create('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: 'smoke-node' } });
  const seen: boolean[] = [];
  const informer = new Informer(client, {
    path: '/api/v1/nodes',
    fieldSelector: 'metadata.name=smoke-node',
    log: createLogger('test', 'warn'),
    onChange: (objs) => {
      const n = objs.values().next().value as Node | undefined;
      seen.push(Boolean(n?.spec?.unschedulable));
    },
  });
  informer.start();
  try {
    await waitFor('initial sync', () => informer.hasSynced, { timeoutMs: 10_000 });
    t.equal(seen.at(-1), false);
    const r = await cp.kubectl(['cordon', 'smoke-node']);
    t.equal(r.code, 0, r.stderr);
    await waitFor('unschedulable via watch', () => seen.at(-1) === true, { timeoutMs: 10_000 });
  } finally {
    await informer.stop();
    client.close();
  }
});

t.test('a Lease replaced with a stale resourceVersion gets 409', async (t) => {
  const client = cp.client();
  const path = '/apis/coordination.k8s.io/v1/namespaces/default/leases';
  const created = await client.create<Lease>(path, {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: 'smoke-lease' },
    spec: { holderIdentity: 'a', leaseDurationSeconds: 15, renewTime: microTime(Date.now()) },
  });
  const stale = structuredClone(created);
  await client.replace(`${path}/smoke-lease`, { ...created, spec: { ...created.spec, holderIdentity: 'b' } });
  await t.rejects(
    client.replace(`${path}/smoke-lease`, { ...stale, spec: { ...stale.spec, holderIdentity: 'c' } }),
    { name: 'ApiError', code: 409 },
  );
  const now = await client.get<Lease>(`${path}/smoke-lease`);
  t.equal(now.spec?.holderIdentity, 'b');
  client.close();
});

t.test('the informer survives an API server restart and sees changes made after it', async (t) => {
  const client = cp.client();
  const { informer, node: latest } = oneNodeInformer(client, 'restart-node');
  await client.create('/api/v1/nodes', {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'restart-node' },
  });
  informer.start();
  try {
    await waitFor('sync', () => latest() !== undefined, { timeoutMs: 10_000 });
    await cp.stopApiServer();
    await cp.startApiServer();
    await cp.kubectl(['label', 'node', 'restart-node', 'after=restart']);
    await waitFor('label seen after restart', () => latest()?.metadata?.labels?.after === 'restart', {
      timeoutMs: 30_000,
    });
    t.ok(informer.restarts >= 1, 'the watch was broken and restarted');
  } finally {
    await informer.stop();
    client.close();
  }
});
