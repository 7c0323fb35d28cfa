// The fail-safe entered before a handover started, with another node's ServiceL2Status lingering
// (issue 42, item 1; robustness SEED=91 TRIAL=62's sequence). Speakers with MetalLB 0.15's status
// semantics (other nodes' objects are left in place), and a status of node-gone (a node powered
// off: its speaker never deleted it) for web/www. The owner's sidecar talks to the API server
// through a proxy that, from the cordon on, refuses every new request (429): its Node watch,
// already open, brings the cordon, but the candidates are never read and the label never
// written, so the fail-safe fires in phase idle. The VIP must be held (answered here until the
// peers, which declare this node dead behind the memberlist cut, claim it on the wire), not
// dropped outright as handed over to node-gone: that left it dark until then (~5 s).

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { longestDark, type ProbeRound } from '../../../lab/bed/arp-probe.ts';
import { kubeconfigJson } from '../../../lab/bed/control-plane.ts';
import { netdevFence } from '../../../lab/bed/fence-scene.ts';
import { createL2Scene, killWait, type L2Scene, METALLB_NS } from '../../../lab/bed/l2-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeObject } from '../../../shared/kube/types.ts';
import { type ApiProxy, apiProxy } from '../bed/api-proxy.ts';

const ROUND_MS = 50;
let w: L2Scene;
let proxy: ApiProxy;

t.before(async () => {
  w = await createL2Scene({ statusVersion: '0.15' });
  proxy = await apiProxy(w.cp, { host: w.bed.hostIPv4 as string });
  const a = w.initialOwner;
  for (const n of w.nodes) await w.startSpeaker(n.name);
  await waitFor(
    'the owner writes its ServiceL2Status',
    async () => (await w.l2Statuses()).some((s) => s.node === a && s.service === 'www'),
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  // Left by a speaker that is gone. With its own object written, 0.15's owner reuses none and
  // leaves this one in place.
  const statuses = `/apis/metallb.io/v1beta1/namespaces/${METALLB_NS}/servicel2statuses`;
  const stray = await w.client.create<KubeObject>(statuses, {
    apiVersion: 'metallb.io/v1beta1',
    kind: 'ServiceL2Status',
    metadata: {
      generateName: 'l2-',
      namespace: METALLB_NS,
      labels: {
        'metallb.io/node': 'node-gone',
        'metallb.io/service-name': 'www',
        'metallb.io/service-namespace': 'web',
      },
    },
    spec: {},
  });
  await w.client.replace(`${statuses}/${stray.metadata?.name}/status`, {
    ...stray,
    status: { node: 'node-gone', serviceName: 'www', serviceNamespace: 'web', interfaces: [] },
  });
  // Every sidecar as usual but the owner's, which goes through the proxy.
  const kubeconfig = join(w.cp.dir, 'kubeconfig-proxied.json');
  writeFileSync(
    kubeconfig,
    kubeconfigJson(proxy.server, w.cp.target.ca ?? '', 'admin', w.cp.target.token ?? ''),
    { mode: 0o600 },
  );
  for (const n of w.nodes) await w.startSidecar(n.name, n.name === a ? { KUBECONFIG: kubeconfig } : {});
  await w.answeredOnlyBy(a);
});
t.teardown(async () => {
  await proxy?.close();
  await w?.destroy();
});

t.test(
  'fail-safe in phase idle with a lingering ServiceL2Status of another node: the VIP is held until the peers claim it, never dark for seconds',
  async (t) => {
    const a = w.initialOwner;
    const names = w.nodes.map((n) => n.name);
    const b = w.ownerAmong(names.filter((n) => n !== a));
    t.ok(
      (await w.l2Statuses()).some((s) => s.node === 'node-gone' && s.service === 'www'),
      'the stray status lingers beside the owner’s',
    );
    const rounds: ProbeRound[] = [];
    const probe = w.startProbe(ROUND_MS, (r) => rounds.push(r));
    t.teardown(() => killWait(probe, 'SIGKILL'));
    // From now on the owner's sidecar gets nothing new from the API; its open watches stay.
    proxy.refuseWhere(() => true, 1);
    t.teardown(() => proxy.stopRefusing());
    await w.cordon(a, true);
    await w.memberlistCut(a);
    const fence = await netdevFence(w, a);
    // Before: vips4 [VIP], nothing held: dropped as handed over to node-gone.
    t.match(fence, { held: [w.vip] }, 'the VIP announced here is held');
    t.notOk(fence?.vips4.includes(w.vip), 'not dropped outright');
    // The peers declare node-a dead (~5 s) and node-b takes over; its GARP claims the VIP here.
    await w.answeredOnlyBy(b);
    await killWait(probe, 'SIGKILL');
    t.ok(
      longestDark(rounds, ROUND_MS) <= 1_000,
      `never dark for more than 1 s from the cordon to node-b's takeover (worst ${longestDark(rounds, ROUND_MS)} ms over ${rounds.length} rounds)`,
    );
    proxy.stopRefusing();
    await w.cordon(a, false);
    await waitFor(
      'the fence removed once the API answers',
      async () => (await netdevFence(w, a)) === undefined,
      {
        timeoutMs: 90_000,
        intervalMs: 200,
      },
    );
  },
);
