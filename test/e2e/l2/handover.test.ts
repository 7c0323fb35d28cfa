// L2 handover end to end: real API server, real network namespaces, speaker simulators on the
// wire, the drainguard sidecar running in each node namespace as it would in a speaker pod. The
// handover's paths and restarts here; API outages, budgets and eligibility in handover-faults.test.ts.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { longestDark } from '../../../lab/bed/arp-probe.ts';
import { type L2Scene, METALLB_NS } from '../../../lab/bed/l2-scene.ts';
import { sh } from '../../../lab/bed/netns.ts';
import { START_DEADLINE_MS } from '../../../lab/bed/proc.ts';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeObject } from '../../../shared/kube/types.ts';
import { EXCLUDE_LABEL, LABEL_OWNED_ANNOTATION } from '../../../shared/names.ts';
import { handoverBed, ROUND_MS, T } from './handover-bed.ts';

t.test('L2 handover (metallb-speaker profile)', async (t) => {
  const h = handoverBed(t);
  const { status, arpRules, hasFenceTable, answeredOnlyBy, events, settleIdle } = h;
  // The scene and its node names, once t.before has started them.
  let w: L2Scene;
  let names: string[];
  t.before(() => {
    w = h.w;
    names = h.names;
  });

  t.test(
    'cordon: label, handover confirmed by the new owner, then fence; ARP answered only by the new owner',
    async (t) => {
      const a = w.initialOwner;
      const b = w.ownerAmong(names.filter((n) => n !== a));
      await w.cordon(a, true);
      await waitFor(
        'exclude label added and owned',
        async () => {
          const md = (await w.getNode(a)).metadata;
          return EXCLUDE_LABEL in (md?.labels ?? {}) && md?.annotations?.[LABEL_OWNED_ANNOTATION] === 'true';
        },
        T,
      );
      await waitFor(
        'new owner wrote its ServiceL2Status',
        async () => (await w.l2Statuses()).some((s) => s.node === b),
        T,
      );
      await waitFor('fence installed', async () => (await arpRules(a)) === 1, T);
      const st = await waitFor(
        'status annotation says fenced',
        async () => {
          const s = await status(a);
          return s.phase === 'fenced' ? s : undefined;
        },
        T,
      );
      t.strictSame(st.vips, [w.vip]);
      t.equal(st.handedTo?.['web/www'], b);
      await answeredOnlyBy(b);
      const done = await waitFor(
        'handover Event',
        async () => (await events('L2HandoverDone')).join('\n'),
        T,
      );
      t.match(
        done,
        new RegExp(`VIP ${w.vip.replace(/\./g, '\\.')} handed to ${b} in [0-9.]+ s; fence installed on eth0`),
      );
      // `drainguard status` shows it.
      const cli = await sh(
        [
          process.execPath,
          new URL('../../../cli/drainguard.ts', import.meta.url).pathname,
          'status',
          '--kubeconfig',
          w.cp.kubeconfigPath,
        ],
        { timeoutMs: START_DEADLINE_MS },
      );
      t.equal(cli.code, 0, cli.stderr);
      t.match(
        cli.stdout,
        new RegExp(`${a}\\s+yes\\s+drainguard\\s+fenced\\s+\\S+\\s+${w.vip}\\s+${b}\\s+eth0`),
      );
      // /metrics reflect it.
      const metrics = await (await fetch(w.sidecarUrl(a, '/metrics'))).text();
      t.match(metrics, /drainguard_l2_phase\{phase="fenced"\} 1/);

      // Uncordon: fence removed, then the label; the VIP comes back to its first owner.
      await w.cordon(a, false);
      await waitFor('fence removed', async () => !(await hasFenceTable(a)), T);
      await waitFor(
        'label and ownership annotation removed',
        async () => {
          const md = (await w.getNode(a)).metadata;
          return (
            !(EXCLUDE_LABEL in (md?.labels ?? {})) && md?.annotations?.[LABEL_OWNED_ANNOTATION] === undefined
          );
        },
        T,
      );
      await waitFor('status idle', async () => (await status(a)).phase === 'idle', T);
      await answeredOnlyBy(a);
    },
  );

  t.test(
    'kubectl drain --ignore-daemonsets: the speaker pods stay, the VIP moves, uncordon undoes it',
    async (t) => {
      const a = w.initialOwner;
      const b = w.ownerAmong(names.filter((n) => n !== a));
      const drain = await w.cp.kubectl(['drain', a, '--ignore-daemonsets', '--timeout=30s']);
      t.equal(drain.code, 0, drain.stderr);
      t.match(drain.stderr + drain.stdout, /[Ii]gnoring DaemonSet-managed Pods/);
      await waitFor('fence installed', async () => (await arpRules(a)) === 1, T);
      await answeredOnlyBy(b);
      const un = await w.cp.kubectl(['uncordon', a]);
      t.equal(un.code, 0, un.stderr);
      await waitFor('fence removed', async () => !(await hasFenceTable(a)), T);
      await settleIdle();
    },
  );

  t.test('a pre-existing exclude label (kubeadm control plane) is kept on uncordon', async (t) => {
    const a = w.initialOwner;
    const b = w.ownerAmong(names.filter((n) => n !== a));
    await w.setLabel(a, EXCLUDE_LABEL, '');
    // MetalLB honours the label at once: the VIP moves and this node announces nothing.
    await answeredOnlyBy(b);
    await w.cordon(a, true);
    const st = await waitFor(
      'handover settled',
      async () => {
        const s = await status(a);
        return s.phase === 'fenced' ? s : undefined;
      },
      T,
    );
    t.strictSame(st.vips, [], 'nothing announced here, nothing to fence');
    t.equal(await hasFenceTable(a), false);
    t.equal((await w.getNode(a)).metadata?.annotations?.[LABEL_OWNED_ANNOTATION], undefined);
    await w.cordon(a, false);
    await waitFor('status idle', async () => (await status(a)).phase === 'idle', T);
    t.ok(
      EXCLUDE_LABEL in ((await w.getNode(a)).metadata?.labels ?? {}),
      'label drainguard did not add stays',
    );
    await w.setLabel(a, EXCLUDE_LABEL, null);
    await settleIdle();
  });

  t.test(
    'issue 42 item 5: the exclude label removed under the fence is put back at once; the VIP, elected back behind the fence meanwhile, is dark for moments, not until the uncordon',
    async (t) => {
      const a = w.initialOwner;
      const b = w.ownerAmong(names.filter((n) => n !== a));
      await w.cordon(a, true);
      await waitFor('fenced', async () => (await status(a)).phase === 'fenced', T);
      await answeredOnlyBy(b);
      // A label-reconciling tool: every speaker reprocesses, and a (first in MetalLB's order) is
      // elected again, behind its own fence. Before: dark for all 3 s probed (until the uncordon).
      await w.setLabel(a, EXCLUDE_LABEL, null);
      const rounds = await w.probe(60, ROUND_MS);
      const dark = longestDark(rounds, ROUND_MS);
      t.comment(`label removed under the fence: worst dark ${dark} ms over ${rounds.length} rounds`);
      t.ok(dark <= 1000, `dark at most 1 s of the 3 s after the removal (worst ${dark} ms)`);
      const md = (await w.getNode(a)).metadata;
      t.ok(EXCLUDE_LABEL in (md?.labels ?? {}), 'the label put back');
      t.equal(
        md?.annotations?.[LABEL_OWNED_ANNOTATION],
        'true',
        "as drainguard's (taken off at the uncordon)",
      );
      await answeredOnlyBy(b);
      await waitFor(
        'the Warning Event',
        async () =>
          (await events('L2ExcludeLabelRemoved')).some((m) => m.includes(`node ${a} under the fence`)),
        T,
      );
      t.equal((await status(a)).phase, 'fenced', 'still fenced');
      await settleIdle();
    },
  );

  t.test('sidecar killed mid-handover resumes without a duplicate fence', async (t) => {
    const a = w.initialOwner;
    const others = names.filter((n) => n !== a);
    const b = w.ownerAmong(others);
    // Peers stop seeing the API, so nobody confirms while the sidecar is killed and restarted.
    for (const n of others) w.speakers.get(n)?.send('freeze');
    await w.cordon(a, true);
    await waitFor(
      'labelled, awaiting confirmation',
      async () => (await status(a)).phase === 'awaiting-confirmation',
      T,
    );
    await w.stopSidecar(a, 'SIGKILL');
    await w.startSidecar(a);
    t.equal(await arpRules(a), 0, 'no fence before confirmation');
    for (const n of others) w.speakers.get(n)?.send('unfreeze');
    await waitFor('fence installed after resume', async () => (await arpRules(a)) === 1, T);
    await answeredOnlyBy(b);
    // Killed again while fenced: the restart reads the fence back and installs nothing twice.
    await w.stopSidecar(a, 'SIGKILL');
    await w.startSidecar(a);
    await waitFor('status fenced after restart', async () => (await status(a)).phase === 'fenced', T);
    // The annotation is the one written before the kill: wait for the new process to read it back.
    const sc = w.sidecars.get(a);
    await waitFor(
      'logged that it resumed',
      () => sc?.output.some((l) => l.includes('resuming L2 handover')),
      T,
    );
    t.equal(await arpRules(a), 1);
    const tables = await w.nft(a, ['list', 'tables']);
    t.equal((tables.match(/table netdev drainguard/g) ?? []).length, 1);
    await settleIdle();
  });

  t.test(
    'restarted during an API outage while fenced: the fence stays until the drain state is known',
    async (t) => {
      const a = w.initialOwner;
      const b = w.ownerAmong(names.filter((n) => n !== a));
      await w.cordon(a, true);
      await waitFor('fence installed', async () => (await arpRules(a)) === 1, T);
      await w.stopSidecar(a, 'SIGKILL');
      await w.cp.stopApiServer();
      try {
        await w.startSidecar(a);
        const sc = w.sidecars.get(a);
        // It resumes from nft alone, sees no Node, and must keep what it found.
        await waitFor(
          'the restarted sidecar holds its state (or, the defect, undoes the fence)',
          async () =>
            sc?.output.some((l) => l.includes('drain state unknown')) === true || (await arpRules(a)) === 0,
          T,
        );
        t.ok(sc?.output.some((l) => l.includes('resuming L2 handover')));
        t.ok(!sc?.output.some((l) => l.includes('"to":"undoing"')), 'no undo started');
        t.equal(await arpRules(a), 1, 'fence kept during the outage');
      } finally {
        await w.cp.startApiServer();
      }
      await answeredOnlyBy(b);
      t.equal(await arpRules(a), 1, 'still cordoned: fence kept once the API answers');
      await settleIdle();
    },
  );

  t.test(
    'a fence that nft keeps refusing is retried with a growing backoff, not in a busy loop',
    async (t) => {
      const a = w.initialOwner;
      // nft that refuses every transaction (-f) and logs when it was asked; listings still work.
      const dir = t.testdir();
      const calls = join(dir, 'calls');
      writeFileSync(
        join(dir, 'nft'),
        `#!/bin/sh\ncase "$*" in *-f*) date +%s.%N >> '${calls}'; echo 'Error: refused by test' >&2; exit 1;; esac\nexec /usr/sbin/nft "$@"\n`,
        { mode: 0o755 },
      );
      const stamps = () => {
        try {
          return readFileSync(calls, 'utf8').trim().split('\n').map(Number);
        } catch {
          return [];
        }
      };
      // SIGKILL: a SIGTERM would run the pre-stop handover now.
      await w.stopSidecar(a, 'SIGKILL');
      await w.startSidecar(a, { PATH: `${dir}:${process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'}` });
      try {
        await w.cordon(a, true);
        // The confirmation comes first: after the previous test's API outage node-b's speaker may
        // see the label only when its Node watch is re-opened (its backoff: up to 10 s), and six
        // attempts take 9 s more. In one CI run (both lanes busy) 20 s were not enough.
        await waitFor('six refused fence attempts', async () => stamps().length >= 6, {
          timeoutMs: 60_000,
          intervalMs: 50,
        });
        const attempts = stamps();
        const gaps = attempts.slice(1).map((x, i) => x - attempts[i]!);
        // Backoff from 0.2 s doubling (jitter: half to full): the fifth wait is at least 1.6 s.
        t.ok(gaps[4]! >= 1.5, `gaps between attempts grow: ${gaps.map((g) => g.toFixed(3)).join(', ')} s`);
        t.equal(
          await arpRules(a),
          0,
          `no fence (nft refused it): ${(await w.bed.node(a).exec(['nft', 'list', 'ruleset'])).stdout}`,
        );
      } finally {
        await w.stopSidecar(a, 'SIGKILL');
        await w.startSidecar(a);
      }
      await settleIdle();
    },
  );

  t.test(
    'a preStop hook while the pod is not deleted and the node not draining (a container restart) withdraws nothing',
    async (t) => {
      const a = w.initialOwner;
      const res = await fetch(w.sidecarUrl(a, '/prestop'), { signal: AbortSignal.timeout(15_000) });
      t.equal(res.status, 200);
      const body = (await res.json()) as { outcome?: string; why?: string };
      t.equal(body.outcome, 'not-going-away', JSON.stringify(body));
      // Nothing happened: a withdrawal would have labelled the node at once.
      t.equal(await hasFenceTable(a), false);
      t.ok(!(EXCLUDE_LABEL in ((await w.getNode(a)).metadata?.labels ?? {})), 'not labelled');
      await answeredOnlyBy(a);
      // The node still hands over when it really drains.
      const b = w.ownerAmong(names.filter((n) => n !== a));
      await w.cordon(a, true);
      await waitFor('fence installed', async () => (await arpRules(a)) === 1, T);
      await answeredOnlyBy(b);
      await settleIdle();
    },
  );

  t.test(
    "the guarded speaker restarts while its pod stays: a probe failure's hook hands over before the kill, a SIGKILL hands over once reported, a new serving container takes the node back",
    async (t) => {
      const a = w.initialOwner;
      const b = w.ownerAmong(names.filter((n) => n !== a));
      const podPath = `/api/v1/namespaces/${METALLB_NS}/pods/speaker-${a}`;
      // The speaker container's status as the kubelet reports it (no kubelet on the bed).
      const report = async (id: string, restartCount: number, state: 'serving' | 'starting' | 'stopped') => {
        const pod = await w.client.get<KubeObject & { status?: Record<string, unknown> }>(podPath);
        const at = new Date().toISOString();
        await w.client.replace(`${podPath}/status`, {
          ...pod,
          status: {
            ...pod.status,
            containerStatuses: [
              {
                name: 'speaker',
                containerID: `containerd://${id}`,
                image: 'metallb/speaker',
                imageID: '',
                restartCount,
                ready: state === 'serving',
                state:
                  state !== 'stopped'
                    ? { running: { startedAt: at } }
                    : { terminated: { exitCode: 137, reason: 'Error', startedAt: at, finishedAt: at } },
              },
            ],
          },
        });
      };
      const labelled = async () => EXCLUDE_LABEL in ((await w.getNode(a)).metadata?.labels ?? {});
      const takenBack = () =>
        waitFor('label and fence gone', async () => !(await labelled()) && !(await hasFenceTable(a)), T);
      await report('one', 0, 'serving');
      // Replaced by one that guards the speaker: SIGKILL, since a SIGTERM means "pod going away"
      // and would hand the VIP over first (this test once failed so: the hook then found nothing
      // announced here and handed over nothing).
      await w.stopSidecar(a, 'SIGKILL');
      await w.startSidecar(a, { DRAINGUARD_GUARDED_CONTAINER: 'speaker' });
      try {
        // 1. A failed liveness probe: the kubelet calls the hook, then kills the container.
        const res = await fetch(w.sidecarUrl(a, '/prestop'), { signal: AbortSignal.timeout(30_000) });
        const body = (await res.json()) as { outcome?: string; 'l2-handover'?: { outcome?: string } };
        t.equal(body.outcome, 'restarting', JSON.stringify(body));
        t.equal(body['l2-handover']?.outcome, 'handed-over', 'the hook returned once a peer announced');
        // The fence follows the confirmation (the hook's wait ends on the decision).
        await waitFor('fence installed', async () => (await arpRules(a)) === 1, T);
        await answeredOnlyBy(b);
        await w.stopSpeaker(a, 'SIGKILL');
        await report('one', 0, 'stopped');
        await w.startSpeaker(a);
        await report('two', 1, 'serving');
        await takenBack();
        await answeredOnlyBy(a);
        // 2. A SIGKILL (a crash, an OOM kill): no hook; the kubelet reports the container stopped.
        await w.stopSpeaker(a, 'SIGKILL');
        await report('two', 1, 'stopped');
        await waitFor('labelled for the stopped speaker', labelled, T);
        await answeredOnlyBy(b);
        // Restarted after its back-off, running but not ready yet: still handed over.
        await w.startSpeaker(a);
        await report('three', 2, 'starting');
        await report('three', 2, 'serving');
        await takenBack();
        await answeredOnlyBy(a);
      } finally {
        await w.stopSidecar(a, 'SIGKILL');
        await w.startSidecar(a);
      }
      await settleIdle();
    },
  );

  t.test('a frozen-API speaker on the draining node is silenced on the wire', async (t) => {
    const a = w.initialOwner;
    const b = w.ownerAmong(names.filter((n) => n !== a));
    w.speakers.get(a)?.send('freeze');
    await w.cordon(a, true);
    await waitFor('fence installed', async () => (await arpRules(a)) === 1, T);
    // The stale speaker still believes it owns the VIP ...
    t.strictSame(w.speakers.get(a)?.announced, [w.vip]);
    // ... but only the new owner is heard.
    await answeredOnlyBy(b);
    w.speakers.get(a)?.send('unfreeze');
    await settleIdle();
  });
});
