import t from 'tap';
import { longestDark } from '../../../lab/bed/arp-probe.ts';
import { killWait, type L2Scene, METALLB_NS, type ProbeRound } from '../../../lab/bed/l2-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeObject } from '../../../shared/kube/types.ts';
import { EXCLUDE_LABEL } from '../../../shared/names.ts';
import { SPEAKER_CATCH_UP_MAX_MS } from '../../../sidecar/l2/handover/index.ts';
import { handoverBed, ROUND_MS, T } from './handover-bed.ts';

t.test('L2 handover (metallb-speaker profile): outages, budget, eligibility', async (t) => {
  const h = handoverBed(t);
  const { status, arpRules, hasFenceTable, answeredOnlyBy, events, settleIdle } = h;
  // The scene and its node names, once t.before has started them.
  let w: L2Scene;
  let names: string[];
  t.before(() => {
    w = h.w;
    names = h.names;
  });

  t.test('informers survive an API server restart; handover works after it', async (_t) => {
    const a = w.initialOwner;
    const b = w.ownerAmong(names.filter((n) => n !== a));
    await w.cp.stopApiServer();
    await w.cp.startApiServer();
    await w.cordon(a, true);
    // After the restart each informer on the way (the sidecar's Node watch, the speakers' Node
    // informers, the sidecar's status view) backs off up to 10 s before it lists again: the
    // handover must work, not be quick. T's 20 s was missed once in a clean-clone run beside the
    // HA lab cluster (the fence came later; the next test found the handover done).
    await waitFor('fence installed', async () => (await arpRules(a)) === 1, { ...T, timeoutMs: 60_000 });
    await answeredOnlyBy(b);
    await settleIdle();
  });

  t.test(
    'API server stopped while the pod goes away (seed 79 trial 20): fail-safe fence without the memberlist cut; the speaker, stopped after its hook, leaves memberlist and its peers take over at once',
    async (t) => {
      const a = w.initialOwner;
      const b = w.ownerAmong(names.filter((n) => n !== a));
      const rounds: ProbeRound[] = [];
      await w.cp.stopApiServer();
      try {
        const probe = w.startProbe(ROUND_MS, (r) => rounds.push(r));
        try {
          // The kubelet's order: the speaker's preStop hook (/prestop), then its SIGTERM.
          const summary = (await w.podGoingAway(a)) as Record<string, { outcome?: string }>;
          t.equal(summary['l2-handover']?.outcome, 'failsafe-fenced');
          const ruleset = await w.nft(a, ['list', 'ruleset']);
          t.notMatch(ruleset, /th dport @memberlist/, 'memberlist not cut: the leave must get out');
          // Fenced for the time its speaker still runs: every ARP in MetalLB's pools dropped.
          t.match(ruleset, /arp saddr ip @pool4/);
          await answeredOnlyBy(b);
        } finally {
          await killWait(probe, 'SIGKILL');
        }
      } finally {
        await w.cp.startApiServer();
      }
      // With the cut, the leave was dropped and the peers waited for failure detection (~5 s).
      const dark = longestDark(rounds, ROUND_MS);
      t.comment(`pod going away with the API down: worst dark ${dark} ms over ${rounds.length} rounds`);
      t.ok(dark <= 1000, `the VIP is dark at most 1 s (worst ${dark} ms)`);
      // The Warning Event, kept while the API was down, is written once it is back.
      await waitFor(
        'the fail-safe Warning Event, saying why memberlist is not cut',
        async () =>
          (await events('L2FailsafeFence')).some((m) =>
            /left memberlist uncut: the pod is going away/.test(m),
          ),
        T,
      );
      const podEvents = await w.client.get<{ items: { reason?: string; type?: string }[] }>(
        `/api/v1/namespaces/${METALLB_NS}/events`,
      );
      t.ok(podEvents.items.some((e) => e.reason === 'L2FailsafeFence' && e.type === 'Warning'));
      // The pod replaced (its DaemonSet): a new speaker, and a new sidecar that finds the fence,
      // sees the API back and the node schedulable, and undoes it.
      await w.startSpeaker(a);
      await w.stopSidecar(a, 'SIGKILL');
      await w.startSidecar(a);
      await waitFor('fence removed', async () => !(await hasFenceTable(a)), T);
      await settleIdle();
    },
  );

  t.test(
    'budget spent unconfirmed: warn, never fence, take the label back so the node announces again; /prestop reports it',
    async (t) => {
      const a = w.initialOwner;
      const others = names.filter((n) => n !== a);
      await w.stopSidecar(a, 'SIGKILL');
      await w.startSidecar(a, { DRAINGUARD_HANDOVER_BUDGET_SECONDS: '2' });
      // Nobody can confirm: the peers' API view is frozen.
      for (const n of others) w.speakers.get(n)?.send('freeze');
      try {
        await w.cordon(a, true);
        await waitFor(
          'unconfirmed Warning Event',
          async () => (await events('L2HandoverUnconfirmed')).length > 0,
          T,
        );
        // The claim watch may still be on: it drops nothing nobody claimed.
        t.equal(await arpRules(a), 0, 'a dark VIP is worse than a moving one: nothing dropped');
        // The label alone silenced a's speaker and nobody took over: it comes off, a answers again.
        await waitFor(
          'the exclude label removed while still cordoned',
          async () => !(EXCLUDE_LABEL in ((await w.getNode(a)).metadata?.labels ?? {})),
          T,
        );
        t.equal((await w.getNode(a)).spec?.unschedulable, true, 'still cordoned');
        await answeredOnlyBy(a);
        t.match(
          (await events('L2HandoverUnconfirmed')).at(-1) ?? '',
          /exclude label removed so this node announces again/,
        );
        const res = await fetch(w.sidecarUrl(a, '/prestop'), { signal: AbortSignal.timeout(15_000) });
        const summary = (await res.json()) as Record<string, { outcome?: string }>;
        t.equal(summary['l2-handover']?.outcome, 'budget-spent');
      } finally {
        for (const n of others) w.speakers.get(n)?.send('unfreeze');
        await w.stopSidecar(a, 'SIGKILL');
        await w.startSidecar(a);
      }
      await settleIdle();
    },
  );

  t.test(
    'a lingering ServiceL2Status of another node does not confirm (no fence, no dark VIP); a fresh one does',
    async (t) => {
      const a = w.initialOwner;
      const others = names.filter((n) => n !== a);
      const b = w.ownerAmong(others);
      await w.stopSidecar(a, 'SIGKILL');
      await w.startSidecar(a, { DRAINGUARD_HANDOVER_BUDGET_SECONDS: '5' });
      // Its ServiceL2Status list is in (it logs the mode then): the leftover below arrives as a
      // change it sees, as a real leftover would have been there long before the handover.
      await waitFor(
        'the restarted sidecar has listed ServiceL2Status',
        () => w.sidecars.get(a)?.output.some((l) => l.includes('MetalLB writes ServiceL2Status')),
        T,
      );
      // Nobody re-elects while frozen, and a's speaker (0.16-style) does not clean up others'
      // objects: what names b is a leftover, as MetalLB before 0.16 leaves them.
      for (const n of names) w.speakers.get(n)?.send('freeze');
      const base = `/apis/metallb.io/v1beta1/namespaces/${METALLB_NS}/servicel2statuses`;
      const stale = await w.client.create<KubeObject>(base, {
        apiVersion: 'metallb.io/v1beta1',
        kind: 'ServiceL2Status',
        metadata: { generateName: 'www-leftover-', namespace: METALLB_NS },
        spec: {},
      });
      await w.client.replace(`${base}/${stale.metadata?.name}/status`, {
        ...stale,
        status: { node: b, serviceName: 'www', serviceNamespace: 'web' },
      });
      const before = (await events('L2HandoverUnconfirmed')).length;
      try {
        await w.cordon(a, true);
        await waitFor(
          'unconfirmed after the budget (the leftover did not count)',
          async () => (await events('L2HandoverUnconfirmed')).length > before || (await arpRules(a)) > 0,
          T,
        );
        // Fencing here would leave the VIP dark: b does not announce.
        t.equal(await arpRules(a), 0, 'nothing dropped on the strength of a leftover status');
        // Given up: the label is back off and a announces again.
        await waitFor(
          'label removed after the unconfirmed handover',
          async () => !(EXCLUDE_LABEL in ((await w.getNode(a)).metadata?.labels ?? {})),
          T,
        );
        for (const n of names) w.speakers.get(n)?.send('unfreeze');
        // The next drain, with the leftover still there: b re-elects and writes its own status,
        // written after that handover started: it confirms.
        await w.cordon(a, false);
        await waitFor('given-up state cleared', async () => !(await status(a)).gaveUp, T);
        await w.cordon(a, true);
        await waitFor('fence installed after a fresh confirmation', async () => (await arpRules(a)) === 1, T);
        await answeredOnlyBy(b);
      } finally {
        for (const n of names) w.speakers.get(n)?.send('unfreeze');
        await w.client.delete(`${base}/${stale.metadata?.name}`).catch(() => undefined);
        await w.stopSidecar(a, 'SIGKILL');
        await w.startSidecar(a);
      }
      await settleIdle();
    },
  );

  t.test('observe-only: decides and records, but neither labels nor fences', async (t) => {
    const a = w.initialOwner;
    await w.stopSidecar(a, 'SIGKILL');
    await w.startSidecar(a, { DRAINGUARD_OBSERVE_ONLY: 'true' });
    try {
      await w.cordon(a, true);
      const st = await waitFor(
        'status records the would-be handover',
        async () => {
          const s = (await status(a)) as { phase?: string; observeOnly?: boolean };
          return s.observeOnly && s.phase === 'awaiting-confirmation' ? s : undefined;
        },
        T,
      );
      t.ok(st);
      const started = await waitFor(
        'observe-only Event',
        async () =>
          (await events('L2HandoverStarted')).find((m) => m.startsWith('observe-only, would have:')),
        T,
      );
      t.ok(started.includes(`handing over VIPs ${w.vip}`), started);
      t.ok(!(EXCLUDE_LABEL in ((await w.getNode(a)).metadata?.labels ?? {})), 'not labelled');
      t.equal(await hasFenceTable(a), false, 'not fenced');
      await answeredOnlyBy(a);
      await w.cordon(a, false);
      await waitFor('status idle', async () => (await status(a)).phase === 'idle', T);
    } finally {
      await w.stopSidecar(a, 'SIGKILL');
      await w.startSidecar(a);
    }
    await settleIdle();
  });

  t.test(
    'another node excluded while the handover waits: the re-check takes the label back long before the budget',
    async (t) => {
      const a = w.initialOwner;
      const [b, c] = names.filter((n) => n !== a) as [string, string];
      await w.stopSidecar(a, 'SIGKILL');
      await w.startSidecar(a, { DRAINGUARD_HANDOVER_BUDGET_SECONDS: '120' });
      await w.cordon(c, true);
      // c announces nothing: its handover is just the label.
      await waitFor(`${c} handed over`, async () => (await status(c)).phase === 'fenced', T);
      // Nobody takes a's VIP over meanwhile: the peers' API view is frozen.
      for (const n of [b, c]) w.speakers.get(n)?.send('freeze');
      try {
        await w.cordon(a, true);
        await waitFor(
          'a labelled, awaiting confirmation',
          async () => (await status(a)).phase === 'awaiting-confirmation',
          T,
        );
        // b is cordoned too: now no node but a could announce the VIP.
        await w.cordon(b, true);
        await waitFor(
          'a takes its label back (budget 120 s: only the re-check can do it)',
          async () => !(EXCLUDE_LABEL in ((await w.getNode(a)).metadata?.labels ?? {})),
          T,
        );
        t.ok(
          await waitFor('its claim watch removed with the label', async () => !(await hasFenceTable(a)), T),
          'no fence left: its claim watch went with the label',
        );
        // Events are written after the action, without holding it up: wait for it.
        await waitFor(
          'the refusal Event',
          async () =>
            (await events('L2HandoverImpossible')).some((m) => m.includes('no longer selected meanwhile')),
          T,
        );
        await answeredOnlyBy(a);
      } finally {
        for (const n of [b, c]) w.speakers.get(n)?.send('unfreeze');
        await w.stopSidecar(a, 'SIGKILL');
        await w.startSidecar(a);
      }
      await settleIdle();
    },
  );

  t.test('never strand a VIP: with no other eligible node nothing is labelled or fenced', async (t) => {
    const a = w.initialOwner;
    const others = names.filter((n) => n !== a);
    for (const n of others) {
      await w.cordon(n, true);
      // They announce nothing, so their handover is just the label.
      await waitFor(`${n} handed over`, async () => (await status(n)).phase === 'fenced', T);
    }
    // This cordon's refusal, not one an earlier test left behind naming the same VIP.
    const refusals = async () =>
      (
        await w.client.get<{ items: (KubeObject & { reason?: string; message?: string })[] }>(
          '/api/v1/namespaces/default/events',
        )
      ).items.filter((e) => e.reason === 'L2HandoverImpossible');
    const before = new Set((await refusals()).map((e) => e.metadata?.uid));
    await w.cordon(a, true);
    await waitFor(
      'refusal Event',
      async () =>
        (await refusals()).some(
          (e) =>
            !before.has(e.metadata?.uid) &&
            (e.message ?? '').includes(w.vip) &&
            (e.message ?? '').includes('not labelling'),
        ),
      T,
    );
    t.ok(!(EXCLUDE_LABEL in ((await w.getNode(a)).metadata?.labels ?? {})));
    t.equal(await hasFenceTable(a), false);
    const metrics = await (await fetch(w.sidecarUrl(a, '/metrics'))).text();
    t.match(metrics, /drainguard_l2_handover_impossible 1/);
    await answeredOnlyBy(a);
    await settleIdle();
  });

  /** A second VIP of the pool, and who announces it with every node eligible. */
  const secondVip = (notOwnedBy: string) => {
    for (let i = 1; i < 20; i++) {
      const vip = w.vipAt(i);
      if (w.ownerAmong(names, vip) !== notOwnedBy) return vip;
    }
    throw new Error('no VIP in the pool owned by another node');
  };
  const removeService = async (name: string) => {
    await w.client.delete(`/api/v1/namespaces/web/services/${name}`).catch(() => undefined);
    await w.setEndpoints(name, []).catch(() => undefined);
  };

  t.test(
    'fail-safe while draining with a second VIP owned by another node: the cut-off speaker elects itself for both, the fenced node answers neither',
    async (t) => {
      const a = w.initialOwner;
      const b = w.ownerAmong(names.filter((n) => n !== a));
      const vip2 = secondVip(a);
      const c = w.ownerAmong(names, vip2);
      await w.addService({ name: 'second', vip: vip2, endpointNodes: names });
      try {
        await answeredOnlyBy(c, vip2);
        // A drain (the pod stays) its peers cannot confirm, then the API gone: the fail-safe cuts.
        const unfreeze = await w.drainUnconfirmed(a);
        await w.cp.stopApiServer();
        try {
          t.match(await w.memberlistCut(a), /arp saddr ip @pool4/, "MetalLB's pools dropped");
          // Memberlist is probe/ack: a's speaker hears no peer any more and announces every VIP.
          await waitFor(
            `${a}'s speaker, cut off, announces ${vip2} too`,
            () => w.speakers.get(a)?.announced.includes(vip2),
            T,
          );
          // Yet on the wire only the peers answer, each for its own VIP.
          await answeredOnlyBy(c, vip2);
          await answeredOnlyBy(b);
        } finally {
          await w.cp.startApiServer();
          unfreeze();
        }
        // The drain ends: fence and cut removed, then the label (after an API outage it stays
        // twice the outage, at most 30 s, while the speakers catch up).
        await w.cordon(a, false);
        // After the outage the cut fence too stays until the speakers catch up (≤ 30 s).
        await waitFor('fence removed', async () => !(await hasFenceTable(a)), {
          ...T,
          timeoutMs: SPEAKER_CATCH_UP_MAX_MS + T.timeoutMs,
        });
        await w.unlabelled(a);
        // A fresh sidecar for the next test: this one's watches may still back off after the API
        // restart (the next test once waited 20 s in vain for its refusal Event).
        await w.stopSidecar(a, 'SIGKILL');
        await w.startSidecar(a);
      } finally {
        await removeService('second');
      }
      await settleIdle();
    },
  );

  t.test(
    'a Local service whose only ready endpoint is on the cordoned node: no label, its VIP keeps answering; handed over once an endpoint is ready elsewhere',
    async (t) => {
      const a = w.initialOwner;
      const b = w.ownerAmong(names.filter((n) => n !== a));
      const y = names.find((n) => n !== a) as string;
      const vip3 = w.vipAt(19);
      await w.addService({ name: 'local', vip: vip3, local: true, endpointNodes: [a] });
      try {
        await answeredOnlyBy(a, vip3);
        await waitFor(
          `${a}'s ServiceL2Status for the Local service`,
          async () => (await w.l2Statuses()).some((s) => s.service === 'local' && s.node === a),
          T,
        );
        await w.cordon(a, true);
        await waitFor(
          'refusal naming the Local service',
          async () => (await events('L2HandoverImpossible')).some((m) => m.includes(`web/local (${vip3})`)),
          T,
        );
        t.ok(!(EXCLUDE_LABEL in ((await w.getNode(a)).metadata?.labels ?? {})), 'not labelled');
        t.equal(await hasFenceTable(a), false);
        await answeredOnlyBy(a, vip3);
        await answeredOnlyBy(a);
        // The endpoint is ready on another node now (its pod rescheduled): MetalLB moves the Local
        // VIP there, and the re-check lets the rest of the handover run.
        await w.setEndpoints('local', [y]);
        await waitFor('fence installed', async () => (await arpRules(a)) === 1, T);
        await answeredOnlyBy(y, vip3);
        await answeredOnlyBy(b);
      } finally {
        await removeService('local');
      }
      await settleIdle();
    },
  );
});
