// kube-proxy in IPVS mode (and kube-router) binds every LoadBalancer VIP on a dummy link,
// `kube-ipvs0`, on every node, and MetalLB asks for strictARP (arp_ignore=1, arp_announce=2) so the
// kernels do not answer for it. The VIP is then a local address: `ip route get <VIP>` answers
// `local … dev lo`. The fence must still go on the link the VIP's ARP goes out of, and the
// fail-safe must not count the VIP among the node's own addresses (issue 22, defect 2). This
// kernel has no IPVS and no dummy driver: an `ifb` link (no ARP, down, nothing goes out of it)
// named kube-ipvs0 holds the addresses, which is all the routing and ARP behaviour depends on.
import t from 'tap';
import {
  netdevFence,
  nodeEvents,
  startSpeakersThenSidecars,
  statusIn,
} from '../../../lab/bed/fence-scene.ts';
import { createL2Scene, type L2Scene } from '../../../lab/bed/l2-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import { SPEAKER_CATCH_UP_MAX_MS } from '../../../sidecar/l2/handover/index.ts';

const T = { timeoutMs: 20_000, intervalMs: 50 };
let w: L2Scene;
let names: string[];

t.before(async () => {
  w = await createL2Scene();
  names = w.nodes.map((n) => n.name);
  for (const n of w.nodes) {
    await n.run(['sysctl', '-qw', 'net.ipv4.conf.all.arp_ignore=1', 'net.ipv4.conf.all.arp_announce=2']);
    await n.run(['ip', 'link', 'add', 'kube-ipvs0', 'type', 'ifb']);
    // Every Service IP on every node: the LoadBalancer VIP and a ClusterIP.
    for (const ip of [w.vip, '10.96.0.1'])
      await n.run(['ip', 'addr', 'add', `${ip}/32`, 'dev', 'kube-ipvs0']);
  }
  const route = JSON.parse(await w.nodes[0]!.run(['ip', '-j', 'route', 'get', w.vip])) as { type?: string }[];
  t.equal(route[0]?.type, 'local', 'the VIP is local on the nodes, as with IPVS');
  await startSpeakersThenSidecars(w);
  await w.answeredOnlyBy(w.initialOwner);
});
t.teardown(async () => {
  await w?.destroy();
});

t.test(
  'cordon: the fence goes on the link that carries the VIP; the draining node falls silent',
  async (t) => {
    const a = w.initialOwner;
    const b = w.ownerAmong(names.filter((n) => n !== a));
    // A speaker with a stale API view keeps answering: only the fence silences it.
    w.speakers.get(a)?.send('freeze');
    await w.cordon(a, true);
    const st = await statusIn(w, a);
    t.strictSame(st.interfaces, ['eth0'], 'the link of the VIP subnet, not lo, not none');
    t.equal(st.fenced, true);
    const fence = await waitFor('fence installed', () => netdevFence(w, a), T);
    t.strictSame(fence.interfaces, ['eth0']);
    t.strictSame(fence.vips4, [w.vip]);
    t.strictSame(w.speakers.get(a)?.announced, [w.vip], 'the stale speaker still believes it owns the VIP');
    await w.answeredOnlyBy(b);
    const done = await waitFor(
      'handover Event',
      async () => (await nodeEvents(w, 'L2HandoverDone')).at(-1),
      T,
    );
    t.match(done.message, /fence installed on eth0$/);

    w.speakers.get(a)?.send('unfreeze');
    await w.cordon(a, false);
    await waitFor('fence removed', async () => (await netdevFence(w, a)) === undefined, T);
    await w.answeredOnlyBy(a);
  },
);

t.test(
  "fail-safe: the VIP on kube-ipvs0 is not the node's own address; the cut-off speaker is silenced",
  async (t) => {
    const a = w.initialOwner;
    const b = w.ownerAmong(names.filter((n) => n !== a));
    // A drain (the pod stays) its peers cannot confirm, then the API gone: the fail-safe cuts.
    const unfreeze = await w.drainUnconfirmed(a);
    await w.cp.stopApiServer();
    try {
      await w.memberlistCut(a);
      const fence = await netdevFence(w, a);
      t.strictSame(fence?.interfaces, ['eth0'], 'a netdev fence on the VIP subnet link');
      t.notOk(fence?.ownAddresses?.includes(w.vip), 'the VIP is not let through as an own address');
      // Cut off from memberlist, a's speaker announces every VIP; its peers re-elect b.
      await w.answeredOnlyBy(b);
    } finally {
      await w.cp.startApiServer();
      unfreeze();
    }
    // The drain ends: the fence (and its cut) removed, then the label (after an API outage it
    // stays twice the outage, at most 30 s, while the speakers catch up).
    await w.cordon(a, false);
    // After the outage the cut fence stays until the speakers catch up (≤ 30 s).
    await waitFor('fence removed', async () => (await netdevFence(w, a)) === undefined, {
      ...T,
      timeoutMs: SPEAKER_CATCH_UP_MAX_MS + T.timeoutMs,
    });
    await w.unlabelled(a);
    await w.answeredOnlyBy(a);
  },
);
