// The fence and L2Advertisements that list interfaces (issue 42, item 2): the speakers answer on
// eth0 and eth1; one service's advertisement lists eth1 alone, web/www's lists none (every
// interface, MetalLB's default). The own ServiceL2Status of the one names eth1, of the other
// nothing: the fence must cover web/www's link too. Before, eth1 alone was fenced, and a node
// whose speaker never saw the exclude label (a stale API view) answered web/www on eth0 beside
// its new owner for the whole drain.
import t from 'tap';
import { netdevFence, startSpeakersThenSidecars, statusIn } from '../../../lab/bed/fence-scene.ts';
import { createL2Scene, type L2Scene } from '../../../lab/bed/l2-scene.ts';
import { ipAddressPool, upsert } from '../../../lab/sim/speaker/objects.ts';
import { waitFor } from '../../../shared/clock.ts';

const NS = 'metallb-system';
const ADS = `/apis/metallb.io/v1beta1/namespaces/${NS}/l2advertisements`;
let w: L2Scene;
/** The eth1-only service's VIP: outside the lab pool, won by the initial owner. */
let sideVip: string;

t.before(async () => {
  w = await createL2Scene({ speakerIfaces: ['eth0', 'eth1'] });
  const names = w.nodes.map((n) => n.name);
  // A second link on every node (its far end stays on the node: nothing listens there).
  for (const n of w.nodes) {
    await n.run(['ip', 'link', 'add', 'eth1', 'type', 'veth', 'peer', 'name', 'eth1p']);
    for (const dev of ['eth1', 'eth1p']) await n.run(['ip', 'link', 'set', dev, 'up']);
  }
  const host = Array.from({ length: 50 }, (_, i) => w.bed.addr4(150 + i)).find(
    (ip) => w.ownerAmong(names, ip) === w.initialOwner,
  );
  if (!host) throw new Error('no address in .150–.199 that the initial owner wins');
  sideVip = host;
  // The lab advertisement covers its own pool only (one for every pool would cover eth1's too, and
  // every interface would win); pool eth1 is announced on eth1 alone.
  const base = `/apis/metallb.io/v1beta1/namespaces/${NS}`;
  await upsert(w.client, `${base}/ipaddresspools`, ipAddressPool('eth1', NS, [`${sideVip}/32`]));
  await upsert(w.client, ADS, {
    apiVersion: 'metallb.io/v1beta1',
    kind: 'L2Advertisement',
    metadata: { name: 'lab', namespace: NS },
    spec: { ipAddressPools: ['lab'] },
  });
  await upsert(w.client, ADS, {
    apiVersion: 'metallb.io/v1beta1',
    kind: 'L2Advertisement',
    metadata: { name: 'eth1', namespace: NS },
    spec: { ipAddressPools: ['eth1'], interfaces: ['eth1'] },
  });
  await w.addService({ name: 'side', vip: sideVip, endpointNodes: names });
  await startSpeakersThenSidecars(w);
});
t.teardown(async () => {
  await w?.destroy();
});

t.test(
  "a fence with one service's status naming eth1 covers web/www's link too: a stale own speaker is not heard on eth0",
  async (t) => {
    const a = w.initialOwner;
    const names = w.nodes.map((n) => n.name);
    const b = w.ownerAmong(names.filter((n) => n !== a));
    await waitFor(
      "the owner's statuses: web/side naming eth1, web/www naming none",
      async () => {
        const list = await w.client.get<{
          items: { status?: { node?: string; serviceName?: string; interfaces?: { name: string }[] } }[];
        }>(`/apis/metallb.io/v1beta1/namespaces/${NS}/servicel2statuses`);
        const own = (svc: string) =>
          list.items.find((o) => o.status?.node === a && o.status.serviceName === svc)?.status;
        return (
          own('side')
            ?.interfaces?.map((i) => i.name)
            .join() === 'eth1' &&
          own('www') !== undefined &&
          (own('www')?.interfaces ?? []).length === 0
        );
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    await w.answeredOnlyBy(a);
    // Its speaker's API view goes stale: it never sees the exclude label and keeps answering.
    w.speakers.get(a)?.send('freeze');
    t.teardown(() => w.speakers.get(a)?.send('unfreeze'));
    await w.cordon(a, true);
    const st = await statusIn(w, a, 'fenced', 30_000);
    t.match(st.handedTo, { 'web/www': b }, 'handed over and confirmed');
    t.strictSame(
      (await netdevFence(w, a))?.interfaces,
      ['eth0', 'eth1'],
      'the named link and the link web/www is announced on',
    );
    // Before: a answered web/www on eth0 beside b for the whole drain.
    await w.answeredOnlyBy(b);
  },
);
