// The fail-safe end to end (issue 22): real API server, real network namespaces, speaker
// simulators on the wire, the sidecar in each node namespace. A fail-safe never overturns a
// refused handover; it drops only ARP in MetalLB's pools, so a macvlan pod on the fenced link keeps
// its neighbours; and once it fired, its fence and memberlist cut stay until the drain ends, so a
// new owner whose Node view lags (8 s here: longer than the 5 s margin the cut once had) never
// re-elects the fenced node; the drain's end removes the fence, then the label.
import t from 'tap';
import { longestDark as darkRun, longestDual as dualRun } from '../../../lab/bed/arp-probe.ts';
import { createL2Scene, killWait, type L2Scene, macsIn, type ProbeRound } from '../../../lab/bed/l2-scene.ts';
import { createNamespace } from '../../../lab/bed/netns.ts';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeObject } from '../../../shared/kube/types.ts';
import type { L2State } from '../../../shared/l2-state.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION } from '../../../shared/names.ts';
import { SPEAKER_CATCH_UP_MAX_MS } from '../../../sidecar/l2/handover/index.ts';

const T = { timeoutMs: 30_000, intervalMs: 50 };
/** The probe's interval: every no-answer round is 50 ms of a dark VIP. */
const ROUND_MS = 50;
/** How late the lagging new owner's Node view is: longer than the 5 s margin the cut once had. */
const LAG_MS = 8_000;

const longestDark = (rounds: ProbeRound[]) => darkRun(rounds, ROUND_MS);
const longestDual = (rounds: ProbeRound[]) => dualRun(rounds, ROUND_MS);

t.test('L2 fail-safe (issue 22)', async (t) => {
  let w: L2Scene;
  let names: string[];
  const mac = (n: string) => w.bed.node(n).mac;
  const status = async (n: string) =>
    JSON.parse((await w.getNode(n)).metadata?.annotations?.[L2_STATE_ANNOTATION] ?? '{}') as Partial<L2State>;
  const labelled = async (n: string) => EXCLUDE_LABEL in ((await w.getNode(n)).metadata?.labels ?? {});
  const fenceTable = async (n: string) =>
    (await w.bed.node(n).exec(['nft', 'list', 'table', 'netdev', 'drainguard'])).code === 0;
  const events = async (reason: string) =>
    (
      await w.client.get<{ items: (KubeObject & { reason?: string; message?: string })[] }>(
        '/api/v1/namespaces/default/events',
      )
    ).items
      .filter((e) => e.reason === reason)
      .map((e) => e.message ?? '');
  /**
   * Uncordoned everywhere, and every sidecar has seen it (a refusal is published until then).
   * After an API outage the label stays up to twice the outage (≤ SPEAKER_CATCH_UP_MAX_MS) once
   * it is back: the deadline covers that hold (CI of 1e9dc9b: node-a not idle 30 s after a
   * fail-safe on a loaded machine).
   */
  const backToIdle = async () => {
    for (const n of names) {
      await w.cordon(n, false);
      await waitFor(
        `${n} idle`,
        async () => !(await labelled(n)) && !(await fenceTable(n)) && !(await status(n)).stranded,
        { ...T, timeoutMs: SPEAKER_CATCH_UP_MAX_MS + T.timeoutMs },
      );
    }
    await w.answeredOnlyBy(w.initialOwner);
  };

  t.before(async () => {
    w = await createL2Scene();
    names = w.nodes.map((n) => n.name);
    await w.startAll();
    await w.answeredOnlyBy(w.initialOwner);
  });
  t.teardown(async () => {
    await w?.destroy();
  });

  t.test(
    'a refused drain (a Local service only node-a may announce) survives a 5 s API blip: its VIP keeps answering from node-a, no label, no fence',
    async (t) => {
      const a = w.initialOwner;
      const vip = w.vipAt(19);
      await w.addService({ name: 'local', vip, local: true, endpointNodes: [a] });
      try {
        await w.answeredOnlyBy(a, vip);
        await w.cordon(a, true);
        await waitFor(
          'the refusal naming the Local service',
          async () => (await events('L2HandoverImpossible')).some((m) => m.includes(`web/local (${vip})`)),
          T,
        );
        // A control-plane rollout: the API server is gone for 100 rounds of 50 ms (past the 2 s grace).
        await w.cp.stopApiServer();
        let during: ProbeRound[];
        try {
          during = await w.probeVip(vip, 100, ROUND_MS);
        } finally {
          await w.cp.startApiServer();
        }
        // A fail-safe would fence node-a: seconds dark. One round may go unanswered on a loaded
        // machine (the CI of 9d9d15a: one 50 ms round, node-a answering before and after it).
        t.ok(
          longestDark(during) <= ROUND_MS,
          `never dark during the outage but for a lost probe (no fail-safe over a refusal): ${longestDark(during)} ms`,
        );
        t.strictSame(macsIn(during), [mac(a)]);
        await waitFor(
          'the sidecar sees the API again',
          async () =>
            /drainguard_api_view_synced 1/.test(await (await fetch(w.sidecarUrl(a, '/metrics'))).text()),
          T,
        );
        // Two more seconds of reconciles with the API back: still node-a, still no label.
        const after = await w.probeVip(vip, 40, ROUND_MS);
        t.ok(longestDark(after) <= ROUND_MS, `dark ${longestDark(after)} ms after the outage`);
        t.strictSame(macsIn(after), [mac(a)]);
        t.notOk(await labelled(a), 'no exclude label after the outage: the refusal stands');
        t.notOk(await fenceTable(a), 'no fence');
        t.ok((await status(a)).stranded, 'still published as refused');
      } finally {
        await w.client.delete('/api/v1/namespaces/web/services/local').catch(() => undefined);
        await w.setEndpoints('local', []).catch(() => undefined);
      }
      await backToIdle();
    },
  );

  t.test(
    "the fail-safe drops ARP only in MetalLB's pools: a macvlan pod on the fenced link stays reachable while the VIP is silenced there",
    async (t) => {
      const a = w.initialOwner;
      const b = w.ownerAmong(names.filter((n) => n !== a));
      // A pod with a macvlan on node-a's eth0, its address outside the pool (.100–.120).
      const pod = await createNamespace('mvpod');
      t.teardown(() => pod.destroy());
      t.teardown(() => backToIdle());
      await w.bed
        .node(a)
        .run(['ip', 'link', 'add', 'mv0', 'link', 'eth0', 'type', 'macvlan', 'mode', 'bridge']);
      await w.bed.node(a).run(['ip', 'link', 'set', 'mv0', 'netns', pod.ns]);
      const podIP = w.bed.addr4(200);
      await pod.run(['ip', 'addr', 'add', `${podIP}/24`, 'dev', 'mv0']);
      await pod.run(['ip', 'link', 'set', 'mv0', 'up']);
      const podMac = (
        JSON.parse(await pod.run(['ip', '-j', 'link', 'show', 'mv0'])) as { address: string }[]
      )[0]?.address;
      await waitFor(
        'the macvlan pod answers ARP',
        async () => macsIn(await w.probeVip(podIP, 6, ROUND_MS)).join() === podMac,
        T,
      );
      // A drain (the pod stays) its peers cannot confirm, then the API gone: the fail-safe cuts.
      const unfreeze = await w.drainUnconfirmed(a);
      t.teardown(unfreeze);
      await w.cp.stopApiServer();
      try {
        const ruleset = await w.memberlistCut(a);
        t.match(ruleset, /arp saddr ip @pool4/, 'the pools are dropped');
        t.notMatch(ruleset, /!= @own4/, 'not every ARP but the own addresses');
        t.match(ruleset, /th dport @memberlist/);
        await w.answeredOnlyBy(b);
        const rounds = await w.probeVip(podIP, 20, ROUND_MS);
        t.ok(
          rounds.every((r) => r.macs.join() === podMac),
          `the macvlan pod answers every probe during the fail-safe: ${JSON.stringify(rounds.map((r) => r.macs))}`,
        );
      } finally {
        await w.cp.startApiServer();
        unfreeze();
      }
      const fenced = await waitFor(
        'the fail-safe Event',
        async () => (await events('L2FailsafeFence')).find((m) => m.includes("MetalLB's address pools")),
        T,
      );
      t.match(fenced, /ARP\/NA in MetalLB's address pools \S+-\S+/);
    },
  );

  t.test(
    `after a fail-safe the fence and memberlist cut stay until the drain ends: a new owner whose Node view lags ${LAG_MS / 1000} s never leaves the VIP dark; the drain's end removes fence, cut and label`,
    async (t) => {
      const a = w.initialOwner;
      const b = w.ownerAmong(names.filter((n) => n !== a));
      t.teardown(() => backToIdle());
      // A drain (the pod stays) its peers cannot confirm, then the API server gone (a path cut
      // silently would go unnoticed by a sidecar that sends nothing while it waits).
      const unfreeze = await w.drainUnconfirmed(a);
      t.teardown(unfreeze);
      // Probed from before the outage until node-b alone answers: the fail-safe's own takeover.
      const takeover: ProbeRound[] = [];
      const takeoverProbe = w.startProbe(ROUND_MS, (r) => takeover.push(r));
      t.teardown(() => killWait(takeoverProbe, 'SIGKILL'));
      await w.cp.stopApiServer();
      let restored = false;
      const rounds: ProbeRound[] = [];
      try {
        await w.memberlistCut(a);
        // The peers declare node-a dead and node-b takes over.
        await w.answeredOnlyBy(b).catch(async (e: unknown) => {
          // Who answers instead (a flake once: the peers had not taken over within 20 s).
          const macs = (await w.probe(10)).map((r) => r.macs.join('+') || '-');
          t.comment(
            `after the fail-safe: ${macs.join(' ')}; a=${mac(a)} b=${mac(b)}; status ${JSON.stringify(await status(a))}`,
          );
          throw e;
        });
        await killWait(takeoverProbe, 'SIGKILL');
        // Robustness SEED=91 TRIAL=62: the fail-safe fenced node-a's VIP at once, and it was dark
        // until memberlist declared node-a dead (4.9 s). Held until node-b claimed it, it is not.
        const runs: string[] = [];
        for (const r of takeover) {
          const who = r.macs.map((m) => (m === mac(a) ? 'a' : m === mac(b) ? 'b' : m)).join('+') || '-';
          const last = runs.at(-1)?.split('×');
          if (last?.[0] === who) runs[runs.length - 1] = `${who}×${Number(last[1]) + 1}`;
          else runs.push(`${who}×1`);
        }
        t.comment(
          `fail-safe takeover: worst dark ${longestDark(takeover)} ms, worst dual ${longestDual(takeover)} ms over ${takeover.length} rounds: ${runs.join(' ')}`,
        );
        t.ok(
          longestDark(takeover) <= 1000,
          `the fail-safe leaves the VIP dark ≤ 1 s until node-b takes over (worst ${longestDark(takeover)} ms)`,
        );
        t.ok(
          longestDual(takeover) <= 100,
          `node-a falls silent as node-b's takeover arrives: dual ≤ 0.1 s (worst ${longestDual(takeover)} ms)`,
        );

        w.speakers.get(b)?.send(`node-lag ${LAG_MS}`);
        const probe = w.startProbe(ROUND_MS, (r) => rounds.push(r));
        try {
          // node-b sees the exclude label only LAG_MS after this.
          unfreeze();
          await w.cp.startApiServer();
          restored = true;
          await waitFor(
            'handed over again and confirmed',
            async () => {
              const s = await status(a);
              return s.phase === 'fenced' && s.handedTo?.['web/www'] === b;
            },
            { ...T, timeoutMs: 60_000 },
          );
          // Past node-b's lag: had the cut been lifted, node-b would hear node-a alive again while
          // its Node view still shows node-a not excluded, and re-elect it into its fence.
          const seen = rounds.length;
          await waitFor(
            `${(LAG_MS + 2_000) / 1000} s more probing`,
            () => rounds.length >= seen + (LAG_MS + 2_000) / ROUND_MS,
            { ...T, timeoutMs: LAG_MS + 30_000 },
          );
        } finally {
          await killWait(probe, 'SIGKILL');
        }
        t.comment(
          `API back with node-b lagging ${LAG_MS} ms: worst dark ${longestDark(rounds)} ms, worst dual ${longestDual(rounds)} ms over ${rounds.length} rounds of ${ROUND_MS} ms`,
        );
        t.ok(
          longestDark(rounds) <= 1000,
          `the VIP is never dark for more than 1 s (worst ${longestDark(rounds)} ms over ${rounds.length} rounds)`,
        );
        t.notOk(
          rounds.slice(-20).some((r) => r.macs.includes(mac(a))),
          'the fenced node is not heard at the end',
        );
        t.match(
          await status(a),
          {
            phase: 'fenced',
            memberlistCut: true,
            failsafeDrop: 'pools',
            failsafeKept: /until the drain ends/,
          },
          'the cut is still on, and the status says why',
        );
        t.match(
          await w.nft(a, ['list', 'ruleset']),
          /th dport @memberlist/,
          'the memberlist cut is installed',
        );
        t.ok(await labelled(a), 'the exclude label is on');
        t.ok(
          (await events('L2HandoverConfirmed')).some((m) =>
            m.includes('fail-safe fence and memberlist cut kept until the drain ends'),
          ),
          'the Event says the cut is kept and why',
        );
        t.ok(
          (await events('L2FailsafeFence')).some((m) =>
            m.includes(`${w.vip} answered here until another node claims it on the wire`),
          ),
          'the fail-safe Event says the VIP is held until claimed',
        );
        t.ok(
          (await events('L2VipClaimed')).some((m) => m.includes(`another node claimed ${w.vip}`)),
          "node-b's claim is recorded as an Event",
        );
      } finally {
        if (!restored) await w.cp.startApiServer();
        w.speakers.get(b)?.send('node-lag 0');
      }
      // The drain ends (uncordoned): the fence and its cut first, the label once memberlist had
      // time to rejoin.
      const undo: ProbeRound[] = [];
      const probe = w.startProbe(ROUND_MS, (r) => undo.push(r));
      try {
        await w.cordon(a, false);
        // Held until the peers' watches caught up after the outage: up to twice it, 30 s at most.
        await waitFor('fence and cut removed', async () => !(await fenceTable(a)), {
          ...T,
          timeoutMs: SPEAKER_CATCH_UP_MAX_MS + T.timeoutMs,
        });
        t.ok(await labelled(a), 'the label outlives the fence (memberlist rejoins meanwhile)');
        await waitFor('label removed', async () => !(await labelled(a)), T);
        await waitFor('idle', async () => (await status(a)).phase === 'idle', T);
        await w.answeredOnlyBy(a);
      } finally {
        await killWait(probe, 'SIGKILL');
      }
      t.comment(
        `drain over: worst dark ${longestDark(undo)} ms, worst dual ${longestDual(undo)} ms over ${undo.length} rounds`,
      );
      t.ok(
        longestDark(undo) <= 1000,
        `never dark for more than 1 s while undone (worst ${longestDark(undo)} ms)`,
      );
      t.notOk((await status(a)).memberlistCut);
      t.ok((await events('L2HandoverUndone')).length > 0, 'L2HandoverUndone');
    },
  );
});
