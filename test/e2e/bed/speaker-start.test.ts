// The speaker simulator elects nothing before its API view exists, as MetalLB's controllers start
// only once the manager's caches have synced. A memberlist datagram that arrived while its first
// API read was still waiting ran an election on a view not yet built: "Cannot access
// 'resyncPending' before initialization", logged as a failed reconcile (issue 42, seen in the lab
// cluster with an API server slow to answer). Here the API answers 429 (Retry-After 2 s) until a
// peer's `leave` has reached the speaker past its join time.

import { createSocket } from 'node:dgram';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { kubeconfigJson } from '../../../lab/bed/control-plane.ts';
import { createL2Scene, type L2Scene } from '../../../lab/bed/l2-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import { type ApiProxy, apiProxy } from './api-proxy.ts';

let w: L2Scene;
let proxy: ApiProxy;
t.before(async () => {
  w = await createL2Scene({ nodes: ['node-a', 'node-b'] });
  proxy = await apiProxy(w.cp, { host: w.bed.hostIPv4 as string });
});
t.teardown(async () => {
  await proxy?.close();
  await w?.destroy();
});

t.test('a memberlist datagram before the API view exists: no election, no failed reconcile', async (t) => {
  const kubeconfig = join(w.cp.dir, 'kubeconfig-speaker-start.json');
  writeFileSync(
    kubeconfig,
    kubeconfigJson(proxy.server, w.cp.target.ca ?? '', 'admin', w.cp.target.token ?? ''),
    { mode: 0o600 },
  );
  proxy.refuseWhere(() => true, 2);
  const speaker = w.startSpeaker('node-a', { kubeconfig });
  speaker.catch(() => {});
  // Its first API read comes after its start: a second past that read's refusal, the speaker is
  // past its join time (600 ms), still waiting on the Retry-After.
  await waitFor(
    'a refused read, a second ago',
    () => {
      const first = proxy.calls.find((c) => c.status === 429);
      return first !== undefined && Date.now() - first.t > 1_000;
    },
    { timeoutMs: 30_000 },
  );
  const peer = createSocket('udp4');
  const leave = Buffer.from(JSON.stringify({ type: 'leave', node: 'node-b', inc: 1 }));
  await new Promise<void>((sent, failed) =>
    peer.send(leave, 7946, w.bed.node('node-a').ipv4, (e) => (e ? failed(e) : sent())),
  );
  peer.close();
  t.ok(
    proxy.calls.every((c) => c.status === 429 || c.status === 0),
    'the datagram arrived before any API read was answered',
  );
  proxy.stopRefusing();
  const sp = await speaker;
  const failed = sp.lines.filter((l) => l.msg === 'reconcile failed');
  t.strictSame(failed, [], 'no reconcile failed');
  t.ok(
    sp.lines.some((l) => l.ev === 'ready'),
    'ready once its view is built',
  );
});
