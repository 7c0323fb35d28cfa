// MetalLB 0.14.6–0.15.x keep ServiceL2Status differently from 0.16 (the simulator's
// statusVersion '0.15'): a new owner may reuse and rewrite the object another node left for the
// service, and other nodes' objects are left in place. The handover must still be confirmed by
// the new owner's write, and fence only then.
import t from 'tap';
import { createL2Scene, type L2Scene } from '../../../lab/bed/l2-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION } from '../../../shared/names.ts';

const T = { timeoutMs: 20_000, intervalMs: 50 };

t.test('L2 handover with MetalLB 0.14.6–0.15.x ServiceL2Status (reuse, others left in place)', async (t) => {
  let w: L2Scene;
  let names: string[];
  const answeredOnlyBy = (n: string) => w.answeredOnlyBy(n);
  const reasons = async () =>
    (await w.client.get<{ items: { reason?: string }[] }>('/api/v1/namespaces/default/events')).items.map(
      (e) => e.reason,
    );
  t.before(async () => {
    w = await createL2Scene({ statusVersion: '0.15' });
    names = w.nodes.map((n) => n.name);
    await w.startAll();
    await answeredOnlyBy(w.initialOwner);
  });
  t.teardown(async () => {
    await w?.destroy();
  });

  t.test(
    "cordon: confirmed by the new owner's write, then fenced; uncordon: back to the first owner",
    async (t) => {
      const a = w.initialOwner;
      const b = w.ownerAmong(names.filter((n) => n !== a));
      await w.cordon(a, true);
      const st = await waitFor(
        'fenced and confirmed',
        async () => {
          const s = JSON.parse((await w.getNode(a)).metadata?.annotations?.[L2_STATE_ANNOTATION] ?? '{}') as {
            phase?: string;
            handedTo?: Record<string, string>;
          };
          return s.phase === 'fenced' ? s : undefined;
        },
        T,
      );
      // 0.15 objects carry generateName names, and b's is the one that names it now.
      const statuses = await w.l2Statuses();
      t.equal(st.handedTo?.['web/www'], b, JSON.stringify({ status: st, statuses }));
      // The Event and the status annotation are written independently (the annotation in the
      // background, latest wins): either may land first (CI of 9d9d15a and 90d5d49, under load).
      t.ok(
        await waitFor(
          'the L2HandoverDone Event',
          async () => (await reasons()).includes('L2HandoverDone'),
          T,
        ),
      );
      t.ok(!(await reasons()).includes('L2HandoverUnconfirmed'));
      t.ok(
        statuses.some((s) => s.node === b && s.service === 'www'),
        JSON.stringify(statuses),
      );
      await answeredOnlyBy(b);
      await w.cordon(a, false);
      await waitFor(
        'label and fence gone',
        async () => !(EXCLUDE_LABEL in ((await w.getNode(a)).metadata?.labels ?? {})),
        T,
      );
      await answeredOnlyBy(a);
    },
  );
});
