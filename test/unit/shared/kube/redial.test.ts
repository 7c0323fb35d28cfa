// A connection refused at connect is dialled again at once (issue 23): nothing reached a server,
// and behind the `kubernetes` Service a new connection lands on another API server. On a
// control-plane node whose own API server is fenced as stale, a third of new connections are
// refused; a backoff on each delayed the handover's reads by ~0.9 s in ha-seed.
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import t from 'tap';
import { waitFor } from '../../../../shared/clock.ts';
import { ApiError, refusedAtConnect } from '../../../../shared/kube/api-error.ts';
import { KubeClient, type KubeClientOptions, REDIAL_REFUSED } from '../../../../shared/kube/client.ts';

/** A port with nothing listening on it: connections to it are refused. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/**
 * A server and a client whose agent sends each new connection to the port `route` names for it
 * (by its number, from 0), as a Service's load balancing sends it to one of its endpoints.
 */
async function behindService(
  route: (n: number) => 'refusing' | 'server',
  handler: http.RequestListener,
  opts: KubeClientOptions = {},
) {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const up = (server.address() as AddressInfo).port;
  const down = await closedPort();
  const dials: ('refusing' | 'server')[] = [];
  const agent = new http.Agent({ keepAlive: false });
  // The agent's dialling hook: one endpoint per new connection.
  (agent as unknown as { createConnection: typeof net.createConnection }).createConnection = ((
    _opts: net.NetConnectOpts,
    cb?: () => void,
  ) => {
    const to = route(dials.length);
    dials.push(to);
    return net.createConnection({ host: '127.0.0.1', port: to === 'server' ? up : down }, cb);
  }) as typeof net.createConnection;
  const client = new KubeClient(
    {
      server: 'http://10.96.0.1:443',
      apply: async () => ({ agent, headers: {} }),
      close: () => agent.destroy(),
    },
    opts,
  );
  t.teardown(() => {
    client.close();
    server.closeAllConnections();
    server.close();
  });
  return { client, dials };
}

t.test('refusedAtConnect: a refused connect only', async (t) => {
  t.ok(
    refusedAtConnect(new ApiError('GET', '/x', 0, 'TransportError', 'connect ECONNREFUSED 10.96.0.1:443')),
  );
  t.notOk(refusedAtConnect(new ApiError('GET', '/x', 0, 'TransportError', 'read ECONNRESET')), 'a reset');
  t.notOk(refusedAtConnect(new ApiError('GET', '/x', 0, 'TransportError', 'timed out after 750 ms')));
  t.notOk(
    refusedAtConnect(new ApiError('GET', '/x', 503, 'ServiceUnavailable', 'ECONNREFUSED')),
    'an answer',
  );
  t.notOk(refusedAtConnect(new Error('connect ECONNREFUSED 10.96.0.1:443')), 'not from the client');
});

t.test(
  'a write whose connection is refused goes out again at once on a new one, and is answered',
  async (t) => {
    const seen: string[] = [];
    const { client, dials } = await behindService(
      (n) => (n === 0 ? 'refusing' : 'server'),
      (req, res) => {
        seen.push(`${req.method} ${req.url}`);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"metadata":{"name":"cp-1"}}');
      },
    );
    const node = await client.patch<{ metadata: { name: string } }>(
      '/api/v1/nodes/cp-1',
      { metadata: { labels: { a: 'b' } } },
      'merge',
    );
    t.equal(node.metadata.name, 'cp-1');
    t.strictSame(dials, ['refusing', 'server'], 'a second connection, with no retry asked of the caller');
    t.strictSame(seen, ['PATCH /api/v1/nodes/cp-1'], 'the server saw the write once');
  },
);

t.test('every connection refused: the refusal, after REDIAL_REFUSED more dials and no more', async (t) => {
  const { client, dials } = await behindService(
    () => 'refusing',
    (_req, res) => res.end('{}'),
  );
  const err = await client.get('/api/v1/nodes/cp-1').catch((e: unknown) => e);
  t.ok(refusedAtConnect(err), `the refusal is the error (${(err as Error).message})`);
  t.equal(dials.length, 1 + REDIAL_REFUSED);
});

t.test('a connection reset after the request went out is not sent again by the client', async (t) => {
  let requests = 0;
  const { client, dials } = await behindService(
    () => 'server',
    (req) => {
      requests++;
      req.socket.destroy();
    },
  );
  const err = await client
    .patch('/api/v1/nodes/cp-1', { metadata: { labels: { a: 'b' } } }, 'merge')
    .catch((e: unknown) => e);
  t.type(err, ApiError);
  t.equal((err as ApiError).code, 0);
  t.equal(requests, 1, 'the server may have applied it: not re-sent without a retry asked');
  t.equal(dials.length, 1);
});

t.test(
  'a watch refused at connect opens at once on a new connection, and no API failure is reported',
  async (t) => {
    const results: boolean[] = [];
    const { client, dials } = await behindService(
      (n) => (n === 0 ? 'refusing' : 'server'),
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"type":"ADDED","object":{"metadata":{"name":"cp-1"}}}\n');
      },
      { onResult: (ok) => results.push(ok) },
    );
    const stop = new AbortController();
    const events: string[] = [];
    const watching = client
      .watch<{ metadata: { name: string } }>(
        '/api/v1/nodes',
        {},
        (ev) => events.push(ev.object.metadata.name),
        stop.signal,
      )
      .catch((e: unknown) => e);
    await waitFor('the event', () => events.length > 0, { timeoutMs: 5_000 });
    t.strictSame(events, ['cp-1']);
    t.strictSame(dials, ['refusing', 'server']);
    t.strictSame(results, [], 'a refusal dialled again is no API failure');
    stop.abort();
    t.equal(await watching, undefined);
  },
);

t.test('a watch refused on every dial: rejected with the refusal, reported once', async (t) => {
  const results: boolean[] = [];
  const { client, dials } = await behindService(
    () => 'refusing',
    (_req, res) => res.end(),
    { onResult: (ok) => results.push(ok) },
  );
  const err = await client
    .watch('/api/v1/nodes', {}, () => {}, new AbortController().signal)
    .catch((e: unknown) => e);
  t.ok(refusedAtConnect(err));
  t.equal(dials.length, 1 + REDIAL_REFUSED);
  t.strictSame(results, [false]);
});
