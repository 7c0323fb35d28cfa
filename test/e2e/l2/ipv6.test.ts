// The L2 handover for IPv6: an IPv6-only Service and a dual-stack one (IPv4 first, elected on it,
// both families announced by the same speaker), probed from the client with neighbour
// solicitations (IPv6) and ARP (IPv4) while the owner is cordoned, while its speaker's API view is
// frozen, and while the API server is down (the fail-safe). The speaker simulator answers NS with a
// solicited NA from a raw ICMPv6 socket, as MetalLB's NDP responder does, so the fence's inet
// output rule is what silences a stale owner.
import type { ChildProcess } from 'node:child_process';
import t from 'tap';
import { type ProbeRound, startArpProbe, stopProcess } from '../../../lab/bed/arp-probe.ts';
import { createL2Scene, type L2Scene } from '../../../lab/bed/l2-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION } from '../../../shared/names.ts';

const T = { timeoutMs: 20_000, intervalMs: 50 };
const PROBE_MS = 50;

t.test('L2 handover of IPv6-only and dual-stack services', async (t) => {
  let w: L2Scene;
  let names: string[];
  let a: string;
  /** The IPv6-only Service's VIP, and the dual-stack Service's two (IPv4 first). */
  let v6: string;
  let dual: [string, string];
  const status = async (n: string) =>
    JSON.parse((await w.getNode(n)).metadata?.annotations?.[L2_STATE_ANNOTATION] ?? '{}') as {
      phase?: string;
      vips?: string[];
      handedTo?: Record<string, string>;
    };
  const ruleset = async (n: string) => (await w.bed.node(n).exec(['nft', 'list', 'ruleset'])).stdout;
  const hasFenceTable = async (n: string) =>
    (await w.bed.node(n).exec(['nft', 'list', 'table', 'inet', 'drainguard'])).code === 0 ||
    (await w.bed.node(n).exec(['nft', 'list', 'table', 'netdev', 'drainguard'])).code === 0;
  /** Who takes each VIP over from `a` (the dual-stack Service is elected on its IPv4 address). */
  const successors = () => {
    const others = names.filter((n) => n !== a);
    return { v6: w.ownerAmong(others, v6), dual: w.ownerAmong(others, dual[0]) };
  };
  const answeredOnlyByAll = async (owners: { v6: string; dual: string }) => {
    await w.answeredOnlyBy(owners.v6, v6);
    await w.answeredOnlyBy(owners.dual, dual[0]);
    await w.answeredOnlyBy(owners.dual, dual[1]);
  };
  const settleIdle = async () => {
    for (const n of names) {
      await w.cordon(n, false);
      await waitFor(
        `${n} back to idle`,
        async () =>
          !(EXCLUDE_LABEL in ((await w.getNode(n)).metadata?.labels ?? {})) && !(await hasFenceTable(n)),
        T,
      );
    }
    await answeredOnlyByAll({ v6: a, dual: a });
  };
  /** Probes of every VIP of both Services, one process each, every 50 ms. */
  const probeAll = () => {
    const rounds = new Map<string, ProbeRound[]>();
    const procs: ChildProcess[] = [];
    for (const vip of [v6, ...dual]) {
      const list: ProbeRound[] = [];
      rounds.set(vip, list);
      procs.push(startArpProbe(w.clientNode, vip, PROBE_MS, (r) => list.push(r)));
    }
    return {
      rounds,
      stop: () => Promise.all(procs.map((p) => stopProcess(p, 'SIGKILL'))),
    };
  };
  /** Seconds without an answer and with two answerers, per VIP, in rounds sent from t0 on. */
  const gaps = (rounds: ProbeRound[], t0: number) => {
    const win = rounds.filter((r) => r.t >= t0);
    return {
      none: (win.filter((r) => r.macs.length === 0).length * PROBE_MS) / 1000,
      dual: (win.filter((r) => r.macs.length >= 2).length * PROBE_MS) / 1000,
    };
  };

  t.before(async () => {
    w = await createL2Scene();
    names = w.nodes.map((n) => n.name);
    a = w.initialOwner;
    // VIPs the scene's owner wins with every node eligible, so one cordon moves them all.
    const ownedByA = (at: (i: number) => string, skip: string[] = []) => {
      for (let i = 1; i <= 20; i++) {
        const vip = at(i);
        if (!skip.includes(vip) && w.ownerAmong(names, vip) === a) return vip;
      }
      throw new Error(`no pool address won by ${a}`);
    };
    v6 = ownedByA(w.vip6At);
    dual = [ownedByA(w.vipAt), v6 === w.vip6At(20) ? w.vip6At(19) : w.vip6At(20)];
    await w.addService({ name: 'v6', vip: v6, endpointNodes: names });
    await w.addService({ name: 'dual', vip: dual, endpointNodes: names });
    await w.startAll();
    await answeredOnlyByAll({ v6: a, dual: a });
  });
  t.teardown(async () => {
    await w?.destroy();
  });

  t.test(
    'cordon: both families handed over, confirmed and fenced; per family at most 1 s unanswered and 0.1 s answered twice',
    async (t) => {
      const next = successors();
      const probes = probeAll();
      try {
        await waitFor(
          'every probe answered by the owner alone',
          () =>
            [...probes.rounds.values()].every((r) => {
              const last = r.slice(-10);
              return last.length === 10 && last.every((x) => x.macs.join() === w.bed.node(a).mac);
            }),
          T,
        );
        const t0 = Date.now();
        await w.cordon(a, true);
        const st = await waitFor(
          'status fenced',
          async () => {
            const s = await status(a);
            return s.phase === 'fenced' ? s : undefined;
          },
          T,
        );
        t.strictSame(
          [...(st.vips ?? [])].sort(),
          [w.vip, v6, ...dual].sort(),
          'every VIP of both families handed over',
        );
        t.equal(st.handedTo?.['web/v6'], next.v6, 'IPv6-only Service confirmed by its new owner');
        t.equal(st.handedTo?.['web/dual'], next.dual, 'dual-stack Service confirmed by its new owner');
        const rules = await ruleset(a);
        t.match(rules, /icmpv6 type nd-neighbor-advert @th,64,128 @vip6/, 'NA fence');
        t.match(rules, /arp saddr ip @vip4/, 'ARP fence');
        await answeredOnlyByAll(next);
        // A second of the new owners alone after that, then the figures.
        const settledAt = Date.now();
        await waitFor(
          'a second of rounds after the handover',
          () => [...probes.rounds.values()].every((r) => (r.at(-1)?.t ?? 0) >= settledAt + 1000),
          T,
        );
        for (const [vip, rounds] of probes.rounds) {
          const g = gaps(rounds, t0);
          t.ok(g.none <= 1, `${vip}: ${g.none} s without an answer (at most 1 s)`);
          t.ok(g.dual <= 0.1, `${vip}: ${g.dual} s answered by two nodes (at most 0.1 s)`);
        }
      } finally {
        await probes.stop();
      }
      await settleIdle();
    },
  );

  t.test(
    'a frozen-API owner keeps announcing both families; the fence silences its NAs and ARP replies',
    async (t) => {
      const next = successors();
      w.speakers.get(a)?.send('freeze');
      try {
        await w.cordon(a, true);
        await waitFor('status fenced', async () => (await status(a)).phase === 'fenced', T);
        // The stale speaker still believes it owns every VIP ...
        t.strictSame(
          [...(w.speakers.get(a)?.announced ?? [])].sort(),
          [w.vip, v6, ...dual].sort(),
          'the frozen speaker still announces',
        );
        // ... and still answers the NS on its socket: only the fence keeps it off the wire.
        await answeredOnlyByAll(next);
      } finally {
        w.speakers.get(a)?.send('unfreeze');
      }
      await settleIdle();
    },
  );

  t.test(
    'API server down while draining: the fail-safe fences both families, peers take both over',
    async (t) => {
      const next = successors();
      // A drain (the pod stays) its peers cannot confirm, then the API gone: the fail-safe cuts.
      const unfreeze = await w.drainUnconfirmed(a);
      await w.cp.stopApiServer();
      try {
        await w.memberlistCut(a);
        // Cut off from memberlist, a's speaker hears no peer and announces every VIP of both families ...
        await waitFor(
          `${a}'s speaker, cut off, announces both Services`,
          () => [v6, ...dual].every((v) => w.speakers.get(a)?.announced.includes(v)),
          T,
        );
        t.match(await ruleset(a), /icmpv6 type nd-neighbor-advert/, 'an NA fence is installed');
        // ... yet on the wire only the peers answer, for each family.
        await answeredOnlyByAll(next);
      } finally {
        await w.cp.startApiServer();
        unfreeze();
      }
      // The drain ends: fence and cut removed, then the label (after an API outage it stays
      // twice the outage, at most 30 s, while the speakers catch up).
      await w.cordon(a, false);
      await w.unlabelled(a);
      await settleIdle();
    },
  );
});
