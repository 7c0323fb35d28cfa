// MetalLB < 0.14.4 has no ServiceL2Status, and 0.14.4–0.14.5 install the CRD but write nothing
// into it by default: in both, drainguard takes every LoadBalancer VIP, labels, and fences after
// the settle time, saying the handover is unconfirmed. (An empty CRD read as "no VIPs announced
// here" would fence nothing and report the handover done.) The same holds when
// 0.14.4–0.14.5 run with the flag on: their objects name no service, so they confirm nothing.
import t from 'tap';
import { longestDark, longestDual } from '../../../lab/bed/arp-probe.ts';
import { createL2Scene, killWait, type L2Scene, macsIn, type ProbeRound } from '../../../lab/bed/l2-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION } from '../../../shared/names.ts';

const T = { timeoutMs: 20_000, intervalMs: 50 };

for (const [what, sceneOpts] of [
  ['without the ServiceL2Status CRD (MetalLB < 0.14.4)', { noCrd: true }],
  ['with the CRD but nothing written in it (MetalLB 0.14.4–0.14.5)', { noStatusWrites: true }],
  [
    'with 0.14.4–0.14.5 objects (--enable-l2-service-status: <svc>-<node>, no serviceName)',
    { statusVersion: '0.14.4' },
  ],
] as const)
  t.test(`L2 handover ${what}`, async (t) => {
    let w: L2Scene;
    t.before(async () => {
      w = await createL2Scene({ ...sceneOpts, sidecarEnv: { DRAINGUARD_L2_SETTLE_SECONDS: '2' } });
      await w.startAll();
    });
    t.teardown(async () => {
      await w?.destroy();
    });

    t.test(
      "the drained node's own speaker never sees the label (its API view stale, as on a removed etcd member): it falls silent at the new owner's takeover, not at the settle time",
      async (t) => {
        const a = w.initialOwner;
        const status = async () =>
          JSON.parse((await w.getNode(a)).metadata?.annotations?.[L2_STATE_ANNOTATION] ?? '{}') as {
            phase?: string;
          };
        w.speakers.get(a)?.send('freeze');
        const rounds: ProbeRound[] = [];
        const probe = w.startProbe(50, (r) => rounds.push(r));
        try {
          await w.cordon(a, true);
          await waitFor('fenced after the settle time', async () => (await status()).phase === 'fenced', T);
        } finally {
          await killWait(probe, 'SIGKILL');
          w.speakers.get(a)?.send('unfreeze');
        }
        const [dark, dual] = [longestDark(rounds, 50), longestDual(rounds, 50)];
        t.comment(`${rounds.length} rounds: dark ${dark} ms, dual ${dual} ms`);
        // Before the claim watch node-a answered until the settle-time fence, beside node-b.
        t.ok(dual <= 100, `answered twice ≤ 0.1 s (worst ${dual} ms)`);
        t.ok(dark <= 1000, `dark ≤ 1 s (worst ${dark} ms)`);
        await w.cordon(a, false);
        await waitFor(
          'label and fence gone',
          async () =>
            !(EXCLUDE_LABEL in ((await w.getNode(a)).metadata?.labels ?? {})) &&
            (await w.bed.node(a).exec(['nft', 'list', 'table', 'netdev', 'drainguard'])).code !== 0,
          { ...T, timeoutMs: 60_000 },
        );
        await w.answeredOnlyBy(a);
      },
    );

    t.test('cordon: label, wait the settle time, fence all LoadBalancer VIPs unconfirmed', async (t) => {
      const a = w.initialOwner;
      const b = w.ownerAmong(w.nodes.map((n) => n.name).filter((n) => n !== a));
      const t0 = Date.now();
      await w.cordon(a, true);
      await waitFor(
        'labelled',
        async () => EXCLUDE_LABEL in ((await w.getNode(a)).metadata?.labels ?? {}),
        T,
      );
      // The claim watch drops the VIP as soon as node-b's takeover arrives; the handover's own
      // fence (the phase `fenced`) waits the settle time.
      const ruleset = await waitFor(
        'VIP dropped',
        async () => {
          const r = await w.bed.node(a).exec(['nft', 'list', 'ruleset']);
          return r.stdout.includes('arp saddr ip @vip4') ? r.stdout : undefined;
        },
        T,
      );
      t.ok(ruleset.includes(w.vip), ruleset);
      const st = await waitFor(
        'status fenced',
        async () => {
          const s = JSON.parse((await w.getNode(a)).metadata?.annotations?.[L2_STATE_ANNOTATION] ?? '{}') as {
            phase?: string;
            vips?: string[];
          };
          return s.phase === 'fenced' ? s : undefined;
        },
        T,
      );
      t.ok(Date.now() - t0 >= 2_000, 'fenced, not before the settle time');
      t.strictSame(st.vips, [w.vip]);
      await waitFor(
        'unconfirmed-fence Event',
        async () => {
          const events = await w.client.get<{ items: { reason?: string }[] }>(
            '/api/v1/namespaces/default/events',
          );
          return events.items.some((e) => e.reason === 'L2HandoverUnconfirmedFence');
        },
        T,
      );
      await waitFor(
        `only ${b} answers`,
        async () => {
          const rounds = await w.probe(6);
          return macsIn(rounds).join() === w.bed.node(b).mac && rounds.every((r) => r.macs.length === 1);
        },
        T,
      );
    });

    t.test(
      "API lost while fenced unconfirmed: the fail-safe fence drops every ARP in MetalLB's pools",
      async (_t) => {
        // Still cordoned and fenced (after the settle time, unconfirmed) from the test above.
        const a = w.initialOwner;
        await w.cp.stopApiServer();
        try {
          await waitFor(
            'fail-safe fence with the memberlist cut',
            async () => {
              const r = await w.bed.node(a).exec(['nft', 'list', 'ruleset']);
              return r.stdout.includes('th dport @memberlist') && r.stdout.includes('arp saddr ip @pool4');
            },
            T,
          );
        } finally {
          await w.cp.startApiServer();
        }
      },
    );
  });
