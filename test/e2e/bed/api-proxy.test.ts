// The test proxy (./api-proxy.ts) is faithful where clients can tell: a watch's answer (its status
// and headers) reaches the client when the API server sends it, not with the first event. An
// informer counts a resumed watch as current once the server has accepted it, so a proxy that
// held the headers back kept every quiet view stale behind it (issue 42 item 10: the speakers'
// views through the api-429 fault).
import { connect } from 'node:net';
import t from 'tap';
import { sharedControlPlane } from '../../../lab/bed/control-plane.ts';
import { waitFor } from '../../../shared/clock.ts';
import { apiProxy } from './api-proxy.ts';
import { oneNodeInformer } from './one-node.ts';

t.test(
  'a watch resumed through the proxy on a quiet resource is current at once, before any event',
  async (t) => {
    const cp = await sharedControlPlane();
    const proxy = await apiProxy(cp);
    t.teardown(proxy.close);
    await cp
      .client()
      .create('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: 'proxy-quiet' } });
    const { informer, node } = oneNodeInformer(proxy.client(), 'proxy-quiet');
    informer.start();
    t.teardown(() => informer.stop());
    await waitFor('the first watch is open', () => proxy.counts().watches > 0 && node() !== undefined, {
      timeoutMs: 15_000,
    });
    const watchesBefore = proxy.calls.filter((c) => c.verb === 'WATCH').length;
    // A dropped connection: the informer resumes from its version, and nothing changes meanwhile.
    proxy.cutWatches();
    await waitFor('the cut seen', () => !informer.current, { timeoutMs: 10_000 });
    await waitFor(
      'a new watch asked for',
      () => proxy.calls.filter((c) => c.verb === 'WATCH').length > watchesBefore,
      {
        timeoutMs: 15_000,
      },
    );
    // The informer's backoff after one failure is under a second; the answer comes at once.
    await waitFor('the resumed watch accepted: the view current again', () => informer.current, {
      timeoutMs: 5_000,
    });
    t.equal(proxy.counts().lists, 1, 'resumed from its version, not re-listed');
  },
);

t.test('close() ends every connection, one still in its TLS handshake too', async (t) => {
  const cp = await sharedControlPlane();
  const proxy = await apiProxy(cp);
  // A client that connected and sent nothing yet: no HTTP connection, so closeAllConnections()
  // leaves it, and the TLS server would wait its 120 s handshake timeout.
  const raw = connect(proxy.port, proxy.host);
  t.teardown(() => raw.destroy());
  await new Promise<void>((r) => raw.once('connect', () => r()));
  let closed = false;
  void proxy.close().then(() => {
    closed = true;
  });
  await waitFor('the proxy closed', () => closed, { timeoutMs: 5_000 });
  t.ok(closed);
});
