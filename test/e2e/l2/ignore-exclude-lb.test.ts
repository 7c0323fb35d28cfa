// MetalLB's --ignore-exclude-lb end to end: speakers that ignore the exclude label (the simulator
// as MetalLB's speakersForPool) and sidecars told so by the webhook's variable. The handover could
// never be confirmed (the label moves nothing) and the fail-safe's memberlist cut would end with
// the node re-elected into its own fence, so the sidecar runs none: no label at a cordon, no fence,
// a Warning Event and the status annotation saying why; the VIP moves when the speaker stops.
import t from 'tap';
import { createL2Scene, type L2Scene } from '../../../lab/bed/l2-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeObject } from '../../../shared/kube/types.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION } from '../../../shared/names.ts';

const T = { timeoutMs: 20_000, intervalMs: 50 };

t.test('speakers with --ignore-exclude-lb: no L2 handover, and it says why', async (t) => {
  let w: L2Scene;
  let names: string[];
  const labelled = async (n: string) => EXCLUDE_LABEL in ((await w.getNode(n)).metadata?.labels ?? {});
  const hasFenceTable = async (n: string) =>
    (await w.bed.node(n).exec(['nft', 'list', 'table', 'netdev', 'drainguard'])).code === 0 ||
    (await w.bed.node(n).exec(['nft', 'list', 'table', 'inet', 'drainguard'])).code === 0;
  const events = async (reason: string) => {
    const list = await w.client.get<{ items: (KubeObject & { reason?: string; message?: string })[] }>(
      '/api/v1/namespaces/default/events',
    );
    return list.items.filter((e) => e.reason === reason).map((e) => e.message ?? '');
  };

  t.before(async () => {
    w = await createL2Scene({
      ignoreExcludeLb: true,
      // What the webhook renders for a speaker whose args carry the flag.
      sidecarEnv: { DRAINGUARD_SPEAKER_IGNORES_EXCLUDE_LB: 'true' },
    });
    names = w.nodes.map((n) => n.name);
    await w.startAll();
    await w.answeredOnlyBy(w.initialOwner);
  });
  t.teardown(async () => {
    await w?.destroy();
  });

  t.test('the speakers ignore the label: set by hand, it moves nothing', async (t) => {
    const a = w.initialOwner;
    await w.setLabel(a, EXCLUDE_LABEL, '');
    try {
      // Speakers that honour the label move the VIP within a few hundred ms of the patch (their
      // watch); a second of probes right after it shows the owner alone.
      const rounds = await w.probe(20);
      t.ok(
        rounds.every((r) => r.macs.join() === w.bed.node(a).mac),
        `only ${a} answered in the second after the label: ${JSON.stringify(rounds.map((r) => r.macs))}`,
      );
    } finally {
      await w.setLabel(a, EXCLUDE_LABEL, null);
    }
  });

  t.test(
    'cordon: the exclude label is never set, nothing fenced, the owner keeps answering; Event, status and /prestop say why',
    async (t) => {
      const a = w.initialOwner;
      await w.cordon(a, true);
      try {
        // The handover, if it ran, labels within milliseconds of seeing the cordon; the sidecar that
        // runs none logs that it saw it. Whichever comes first decides.
        const sc = w.sidecars.get(a);
        await waitFor(
          'the sidecar saw the drain (or labelled the node)',
          async () =>
            sc?.output.some((l) => l.includes('L2 handover off (--ignore-exclude-lb)')) === true ||
            (await labelled(a)),
          T,
        );
        t.notOk(await labelled(a), 'the exclude label is not set');
        t.notOk(await hasFenceTable(a), 'no fence');
        // MetalLB ignores cordons (>= 0.15) and, here, the label: the VIP stays where it is.
        await w.answeredOnlyBy(a);
        const status = await waitFor(
          'the status annotation says the handover is off',
          async () => {
            const s = JSON.parse(
              (await w.getNode(a)).metadata?.annotations?.[L2_STATE_ANNOTATION] ?? '{}',
            ) as {
              phase?: string;
              disabled?: string;
            };
            return s.disabled ? s : undefined;
          },
          T,
        );
        t.equal(status.phase, 'idle');
        t.match(status.disabled, /--ignore-exclude-lb/);
        const warned = await waitFor(
          'the L2HandoverOff Warning Event',
          async () => (await events('L2HandoverOff'))[0],
          T,
        );
        t.match(warned, /--ignore-exclude-lb.*could never be confirmed/);
        const summary = await w.prestop(a);
        t.equal(summary['l2-handover']?.outcome, 'l2-handover-off');
        t.match(summary['l2-handover']?.why ?? '', /--ignore-exclude-lb/);
        t.notOk(await labelled(a), 'still not labelled after the pre-stop');
      } finally {
        await w.cordon(a, false);
      }
    },
  );

  t.test('the speaker stops: its peers take the VIP over (memberlist leave)', async () => {
    const a = w.initialOwner;
    const b = w.ownerAmong(names.filter((n) => n !== a));
    await w.stopSpeaker(a, 'SIGTERM');
    try {
      await w.answeredOnlyBy(b);
    } finally {
      await w.startSpeaker(a);
    }
    await w.answeredOnlyBy(a);
  });
});
