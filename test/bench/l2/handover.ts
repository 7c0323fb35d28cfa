// make bench-l2: who answers ARP for the VIP (NDP for IPv6 VIPs), probed from the client every
// 50 ms, through five scenarios in one run (one L2 scene on the bed: API server, 3 speaker nodes, a
// client):
//   1. with drainguard, cordon the owner;
//   2. the frozen-API owner (its speaker stopped seeing the API) with drainguard, cordon it;
//   3. with drainguard, cordon the owner of an IPv6-only Service and of a dual-stack one (IPv4
//      first, both families probed: neighbour solicitations for the IPv6 VIPs);
//   A. baseline: cordon the owner without drainguard (MetalLB >= 0.15 ignores cordon);
//   B. baseline: kill the owner's speaker (no leave): peers fall back to failure detection.
// Then the same measurements on real kubelets (the lab cluster, drainguard from manifests/, the
// speaker simulator as MetalLB's DaemonSet):
//   R1. `kubectl drain` of the owner node (the speaker pod is a DaemonSet's: not evicted);
//   R2. `kubectl delete pod` of the owner's speaker (the kubelet runs the injected preStop hook).
// All times count from the cordon, kill or kubectl command. Last line: one JSON object whose main
// fields are R1 (kubectl drain) and R2 (prestop_*) on real kubelets ("kubelet":"real"), with 1 and 2
// under standin_ keys, 3 as the `ipv6` and `dual_stack` objects (the stand-in's: the lab cluster is
// IPv4-only; dual_stack holds the worse family of each figure) and A, B as baseline_*.
import type { ChildProcess } from 'node:child_process';
import { startArpProbe, stopProcess } from '../../../lab/bed/arp-probe.ts';
import { createL2Scene, killWait, type L2Scene, type ProbeRound } from '../../../lab/bed/l2-scene.ts';
import { startCluster } from '../../../lab/cluster/cluster.ts';
import { installDrainguard, installMetalLbBase } from '../../../lab/cluster/install.ts';
import { installMetalLbL2 } from '../../../lab/cluster/metallb.ts';
import { owner } from '../../../lab/sim/speaker/election.ts';
import { waitFor } from '../../../shared/clock.ts';
import { EXCLUDE_LABEL } from '../../../shared/names.ts';

const INTERVAL_MS = 50;
const WINDOW_MS = 8_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const round3 = (x: number) => Math.round(x * 1000) / 1000;
const note = (msg: string) => process.stderr.write(`[bench-l2] ${msg}\n`);

const rounds: ProbeRound[] = [];
let probe: ChildProcess | undefined;

function window(from: number, to: number): ProbeRound[] {
  return rounds.filter((r) => r.t >= from && r.t < to);
}

async function settle(w: L2Scene, withSidecars: boolean): Promise<void> {
  for (const n of w.nodes) await w.cordon(n.name, false);
  if (withSidecars)
    for (const n of w.nodes)
      await waitFor(
        `${n.name} idle`,
        async () => {
          const node = await w.getNode(n.name);
          const fence = await n.exec(['nft', 'list', 'table', 'netdev', 'drainguard']);
          return !(EXCLUDE_LABEL in (node.metadata?.labels ?? {})) && fence.code !== 0;
        },
        { timeoutMs: 30_000 },
      );
  const owner = w.bed.node(w.initialOwner).mac;
  await waitFor(
    'only the initial owner answers',
    () => {
      const last = rounds.slice(-10);
      return last.length === 10 && last.every((r) => r.macs.length === 1 && r.macs[0] === owner);
    },
    { timeoutMs: 30_000 },
  );
}

interface Scenario {
  newOwnerS: number | undefined;
  dualS: number;
  noneS: number;
  ownerSilentS: number | undefined;
  movedAway: boolean;
}

function analyse(w: L2Scene, t0: number, to: number, newOwner: string, of = rounds): Scenario {
  const win = of.filter((r) => r.t >= t0 && r.t < to);
  const ownerMac = w.bed.node(w.initialOwner).mac;
  const newMac = w.bed.node(newOwner).mac;
  const firstNew = win.find((r) => r.macs.includes(newMac));
  const lastOwner = [...win].reverse().find((r) => r.macs.includes(ownerMac));
  const sec = (n: number) => (n * INTERVAL_MS) / 1000;
  return {
    newOwnerS: firstNew ? (firstNew.t - t0) / 1000 : undefined,
    dualS: sec(win.filter((r) => new Set(r.macs).size >= 2).length),
    noneS: sec(win.filter((r) => r.macs.length === 0).length),
    ownerSilentS: lastOwner ? (lastOwner.t + INTERVAL_MS - t0) / 1000 : 0,
    movedAway: win.some((r) => r.macs.some((m) => m !== ownerMac)),
  };
}

const w = await createL2Scene();
let destroyed = false;
try {
  const names = w.nodes.map((n) => n.name);
  const a = w.initialOwner;
  const b = w.ownerAmong(names.filter((n) => n !== a));
  note(`VIP ${w.vip}: owner ${a}, next ${b}`);
  for (const n of names) await w.startSpeaker(n);
  for (const n of names) await w.startSidecar(n);
  probe = w.startProbe(INTERVAL_MS, (r) => rounds.push(r));
  await settle(w, true);

  // 1. with drainguard
  let t0 = Date.now();
  await w.cordon(a, true);
  await sleep(WINDOW_MS);
  const withDg = analyse(w, t0, t0 + WINDOW_MS, b);
  note(`with drainguard: ${JSON.stringify(withDg)}`);
  await settle(w, true);

  // 2. frozen-API owner, with drainguard
  w.speakers.get(a)?.send('freeze');
  await sleep(300);
  t0 = Date.now();
  await w.cordon(a, true);
  await sleep(WINDOW_MS);
  const frozen = analyse(w, t0, t0 + WINDOW_MS, b);
  note(`frozen-API owner with drainguard: ${JSON.stringify(frozen)}`);
  w.speakers.get(a)?.send('unfreeze');
  await settle(w, true);

  // 3. IPv6-only and dual-stack Services, both won by a, with drainguard
  const family = await ipv6AndDualStack(w, names, a);
  note(`IPv6 and dual-stack with drainguard: ${JSON.stringify(family)}`);
  await settle(w, true);

  // Baselines: no drainguard.
  for (const n of names) await w.stopSidecar(n, 'SIGKILL');
  // A. cordon without drainguard
  t0 = Date.now();
  await w.cordon(a, true);
  await sleep(5_000);
  const baseA = analyse(w, t0, t0 + 5_000, b);
  note(`baseline cordon: ${JSON.stringify(baseA)}`);
  await settle(w, false);

  // B. the owner's speaker crashes (SIGKILL: no memberlist leave)
  t0 = Date.now();
  await w.stopSpeaker(a, 'SIGKILL');
  await waitFor(
    'a peer answers after the crash',
    () => window(t0, Date.now()).some((r) => r.macs.length > 0),
    {
      timeoutMs: 60_000,
    },
  );
  await sleep(1_000);
  const baseB = analyse(w, t0, Date.now(), b);
  note(`baseline crash: ${JSON.stringify(baseB)}`);

  if (probe) await killWait(probe, 'SIGKILL');
  probe = undefined;
  await w.destroy();
  destroyed = true;
  const real = await realKubelets();

  // Main fields on real kubelets; the stand-in's (the bed) under standin_ keys.
  const result = {
    bench: 'l2',
    kubelet: 'real',
    new_owner_after_cordon_s: real.kubectl_drain.new_owner_s,
    dual_answer_s: real.kubectl_drain.dual_answer_s,
    no_answer_s: real.kubectl_drain.no_answer_s,
    prestop_new_owner_s: real.kubectl_delete_pod.new_owner_s,
    prestop_dual_answer_s: real.kubectl_delete_pod.dual_answer_s,
    prestop_no_answer_s: real.kubectl_delete_pod.no_answer_s,
    baseline_crash_no_answer_s: round3(baseB.noneS),
    baseline_cordon_moved: baseA.movedAway,
    probe_interval_ms: INTERVAL_MS,
    standin_new_owner_after_cordon_s: withDg.newOwnerS === undefined ? null : round3(withDg.newOwnerS),
    standin_dual_answer_s: round3(withDg.dualS + frozen.dualS),
    standin_no_answer_s: round3(withDg.noneS + frozen.noneS),
    standin_stale_api_silenced_s: frozen.ownerSilentS === undefined ? null : round3(frozen.ownerSilentS),
    standin_frozen_new_owner_after_cordon_s: frozen.newOwnerS === undefined ? null : round3(frozen.newOwnerS),
    ipv6: family.ipv6,
    dual_stack: family.dual_stack,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  if (probe) await killWait(probe, 'SIGKILL');
  if (!destroyed) await w.destroy();
}

/** The three figures of one cordon, for one VIP or (worst of each) several. */
function figures(...scenarios: Scenario[]) {
  const newOwner = scenarios.map((s) => s.newOwnerS);
  return {
    kubelet: 'standin',
    new_owner_after_cordon_s: newOwner.some((x) => x === undefined)
      ? null
      : round3(Math.max(...(newOwner as number[]))),
    no_answer_s: round3(Math.max(...scenarios.map((s) => s.noneS))),
    dual_answer_s: round3(Math.max(...scenarios.map((s) => s.dualS))),
  };
}

/**
 * Scenario 3: an IPv6-only Service and a dual-stack one, both won by `a` with every node eligible
 * (the dual-stack one is elected on its IPv4 address), each VIP probed on its own; cordon `a`.
 */
async function ipv6AndDualStack(w: L2Scene, names: string[], a: string) {
  const wonBy = (at: (i: number) => string, skip: string[] = []) => {
    for (let i = 1; i <= 20; i++) if (!skip.includes(at(i)) && w.ownerAmong(names, at(i)) === a) return at(i);
    throw new Error(`no pool address won by ${a}`);
  };
  const v6 = wonBy(w.vip6At);
  const dual = [wonBy(w.vipAt), wonBy(w.vip6At, [v6])];
  await w.addService({ name: 'bench-v6', vip: v6, endpointNodes: names });
  await w.addService({ name: 'bench-dual', vip: dual, endpointNodes: names });
  const others = names.filter((n) => n !== a);
  const next = { [v6]: w.ownerAmong(others, v6), [dual[0] as string]: w.ownerAmong(others, dual[0]) };
  next[dual[1] as string] = next[dual[0] as string] as string;
  const probed = new Map<string, ProbeRound[]>([v6, ...dual].map((v) => [v, []]));
  const probes = [...probed].map(([vip, list]) =>
    startArpProbe(w.clientNode, vip, INTERVAL_MS, (r) => list.push(r)),
  );
  try {
    const ownerMac = w.bed.node(a).mac;
    await waitFor(
      `only ${a} answers the IPv6 and dual-stack VIPs`,
      () =>
        [...probed.values()].every((list) => {
          const last = list.slice(-10);
          return last.length === 10 && last.every((r) => r.macs.length === 1 && r.macs[0] === ownerMac);
        }),
      { timeoutMs: 30_000 },
    );
    const t0 = Date.now();
    await w.cordon(a, true);
    await sleep(WINDOW_MS);
    const at = (vip: string) => analyse(w, t0, t0 + WINDOW_MS, next[vip] as string, probed.get(vip));
    return { ipv6: figures(at(v6)), dual_stack: figures(at(dual[0] as string), at(dual[1] as string)) };
  } finally {
    await Promise.all(probes.map((p) => stopProcess(p, 'SIGKILL')));
    for (const name of ['bench-v6', 'bench-dual'])
      await w.client.delete(`/api/v1/namespaces/web/services/${name}`).catch(() => undefined);
  }
}

async function realKubelets() {
  rounds.length = 0;
  const c = await startCluster({ clients: ['client'], log: (l) => note(`cluster: ${l}`) });
  try {
    const vip = c.bed.addr4(100);
    await installMetalLbBase(c);
    await installDrainguard(c);
    await installMetalLbL2(c, vip, { inject: true });
    const names = c.nodes.map((n) => n.name);
    const a = owner(names, vip) as string;
    const b = owner(
      names.filter((n) => n !== a),
      vip,
    ) as string;
    const mac = (n: string) => c.bed.node(n).mac;
    probe = startArpProbe(c.bed.node('client'), vip, INTERVAL_MS, (r) => rounds.push(r));
    const answeredOnlyBy = (n: string) =>
      waitFor(
        `only ${n} answers`,
        () => {
          const last = rounds.slice(-10);
          return last.length === 10 && last.every((r) => r.macs.length === 1 && r.macs[0] === mac(n));
        },
        { timeoutMs: 120_000 },
      );
    const measure = (t0: number, to: number) => {
      const win = window(t0, to);
      const first = win.find((r) => r.macs.includes(mac(b)));
      return {
        new_owner_s: first ? round3((first.t - t0) / 1000) : null,
        dual_answer_s: round3((win.filter((r) => new Set(r.macs).size >= 2).length * INTERVAL_MS) / 1000),
        no_answer_s: round3((win.filter((r) => r.macs.length === 0).length * INTERVAL_MS) / 1000),
      };
    };
    await answeredOnlyBy(a);
    // R1. kubectl drain of the owner
    let t0 = Date.now();
    await c.k(['drain', a, '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=180s']);
    await sleep(WINDOW_MS);
    const drain = measure(t0, t0 + WINDOW_MS);
    note(`real kubelets, kubectl drain: ${JSON.stringify(drain)}`);
    await c.k(['uncordon', a]);
    await answeredOnlyBy(a);
    // R2. kubectl delete pod of the owner's speaker
    const pods = JSON.parse(
      await c.k(['get', 'pods', '-n', 'metallb-system', '-l', 'component=speaker', '-o', 'json']),
    ) as { items: { metadata: { name: string }; spec: { nodeName: string } }[] };
    const pod = pods.items.find((p) => p.spec.nodeName === a)?.metadata.name as string;
    t0 = Date.now();
    await c.k(['delete', 'pod', '-n', 'metallb-system', pod, '--wait=false']);
    await sleep(WINDOW_MS);
    const deletePod = measure(t0, t0 + WINDOW_MS);
    note(`real kubelets, kubectl delete pod: ${JSON.stringify(deletePod)}`);
    return { kubectl_drain: drain, kubectl_delete_pod: deletePod };
  } finally {
    if (probe) await killWait(probe, 'SIGKILL');
    await c.stop();
  }
}
