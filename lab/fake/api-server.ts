// A plain HTTP server standing in for an API server, and a KubeClient on it; both closed when the
// test ends. For the client's own tests (watches, API-down accounting, a stale server).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { KubeClient, type KubeClientOptions } from '../../shared/kube/client.ts';

export async function fakeApiServer(
  handler: http.RequestListener,
  opts: KubeClientOptions & { keepAlive?: boolean } = {},
): Promise<KubeClient> {
  const { keepAlive, ...clientOpts } = opts;
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const agent = new http.Agent({ keepAlive: keepAlive ?? false });
  const client = new KubeClient(
    {
      server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      apply: async () => ({ agent, headers: {} }),
      close: () => agent.destroy(),
    },
    clientOpts,
  );
  t.teardown(() => {
    client.close();
    server.closeAllConnections();
    server.close();
  });
  return client;
}
