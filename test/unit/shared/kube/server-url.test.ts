// The API server's URL may carry a path: Rancher proxies each cluster at
// `https://rancher.example/k8s/clusters/<id>`, and kubectl appends the API path to it. Every
// request and watch of KubeClient must go under that path, with the query kept.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { KubeClient } from '../../../../shared/kube/client.ts';
import { apiUrl } from '../../../../shared/kube/request.ts';

async function recordingServer() {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"items":[]}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  return { seen, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function clientFor(server: string) {
  const agent = new http.Agent();
  const client = new KubeClient({
    server,
    apply: async () => ({ agent, headers: {} }),
    close: () => agent.destroy(),
  });
  t.teardown(() => client.close());
  return client;
}

t.test('apiUrl keeps a path in the server URL (with or without a trailing slash)', async (t) => {
  const p = '/api/v1/nodes';
  t.equal(apiUrl('https://h:6443', p).href, 'https://h:6443/api/v1/nodes');
  t.equal(apiUrl('https://h:6443/', p).href, 'https://h:6443/api/v1/nodes');
  t.equal(
    apiUrl('https://r.example/k8s/clusters/c-m-x', p).href,
    'https://r.example/k8s/clusters/c-m-x/api/v1/nodes',
  );
  t.equal(
    apiUrl('https://r.example/k8s/clusters/c-m-x/', p).href,
    'https://r.example/k8s/clusters/c-m-x/api/v1/nodes',
  );
  const q = apiUrl('https://r.example/k8s/clusters/c', p, {
    fieldSelector: 'metadata.name=a',
    limit: 5,
    x: undefined,
  });
  t.equal(q.pathname, '/k8s/clusters/c/api/v1/nodes');
  t.equal(q.searchParams.get('fieldSelector'), 'metadata.name=a');
  t.equal(q.searchParams.get('limit'), '5');
  t.notOk(q.searchParams.has('x'));
  // A path may carry its own query (cli/status.ts, sidecar/l2/candidates.ts).
  const e = apiUrl('https://r.example/k8s/clusters/c', '/api/v1/events?fieldSelector=a%3Db', { limit: 1 });
  t.equal(e.href, 'https://r.example/k8s/clusters/c/api/v1/events?fieldSelector=a%3Db&limit=1');
  t.equal(
    apiUrl('https://h:6443', '/api/v1/events?fieldSelector=a%3Db').href,
    'https://h:6443/api/v1/events?fieldSelector=a%3Db',
  );
});

t.test('requests and watches go under the server URL path', async (t) => {
  const { seen, base } = await recordingServer();
  const client = clientFor(`${base}/k8s/clusters/c-m-x`);
  await client.get('/api/v1/nodes', { query: { labelSelector: 'a=b' } });
  await client.watch('/api/v1/pods', { resourceVersion: '1' }, () => {}, new AbortController().signal);
  t.equal(seen[0], '/k8s/clusters/c-m-x/api/v1/nodes?labelSelector=a%3Db');
  t.match(seen[1], /^\/k8s\/clusters\/c-m-x\/api\/v1\/pods\?resourceVersion=1&watch=1/);
});
