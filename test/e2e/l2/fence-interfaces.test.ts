// The fence goes on the link the VIP's route uses, chosen at fence time: never the CNI veths and
// bridges a node also has (they come and go with pods; on kernels before 6.16 a vanished name
// fails the whole nft transaction). MetalLB's default L2Advertisement names no interface.
import t from 'tap';
import { createL2Scene, type L2Scene } from '../../../lab/bed/l2-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import { parseFence } from '../../../sidecar/l2/fence.ts';

let w: L2Scene;
t.before(async () => {
  w = await createL2Scene();
  const a = w.bed.node(w.initialOwner);
  // What a CNI leaves on a node: a bridge and pods' veth pairs on it.
  await a.run(['ip', 'link', 'add', 'dgbr0', 'type', 'bridge']);
  for (const v of ['dgv1', 'dgv2']) {
    await a.run(['ip', 'link', 'add', v, 'type', 'veth', 'peer', 'name', `${v}p`]);
    await a.run(['ip', 'link', 'set', v, 'master', 'dgbr0']);
  }
  for (const n of w.nodes) await w.startSpeaker(n.name);
  // The owner's ServiceL2Status first: a sidecar that has seen none treats MetalLB as one that
  // writes none (0.14.4–0.14.5) and fences only after the settle time (10 s), which once ran
  // this test past its deadline.
  await waitFor(
    'the owner announces and writes its ServiceL2Status',
    async () => (await w.l2Statuses()).some((s) => s.node === w.initialOwner),
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  for (const n of w.nodes) await w.startSidecar(n.name);
  // A pod went away after the sidecar started.
  await a.run(['ip', 'link', 'del', 'dgv2']);
});
t.teardown(async () => {
  await w?.destroy();
});

t.test('the fence is on the VIP route link only: no bridge, no veth, none that vanished', async (t) => {
  const a = w.initialOwner;
  await w.cordon(a, true);
  const fence = await waitFor(
    'fence installed',
    async () => {
      const r = await w.bed.node(a).exec(['nft', '-j', 'list', 'table', 'netdev', 'drainguard']);
      return r.code === 0 ? parseFence([r.stdout]) : undefined;
    },
    // Confirmed by the new owner's status in a second or two; the settle path would take 10 s.
    { timeoutMs: 8_000, intervalMs: 100 },
  );
  t.strictSame(fence.interfaces, ['eth0']);
  t.strictSame(fence.vips4, [w.vip]);
});
