// make bench-rollout: what injection costs a DaemonSet rollout, on real kubelets (lab cluster).
// The MetalLB speaker DaemonSet (the simulator, hostNetwork, one pod per node, maxUnavailable 1)
// announcing one VIP, is restarted ROUNDS times without drainguard, then the namespace is labelled, one restart
// injects the sidecar (not measured), and ROUNDS restarts are measured with it — one cluster, one
// run. Per round: wall time of `rollout restart` + `rollout status` divided by the node count; per
// injected pod: the sidecar's time to ready (its container's start to its Ready flag, from a pod
// watch, 0.1 s polling) and its RSS once idle (VmRSS of each sidecar process: the lab's nodes
// share this machine's /proc). Last line JSON.
import { readdirSync, readFileSync } from 'node:fs';
import { startCluster } from '../../../lab/cluster/cluster.ts';
import { installDrainguard, installMetalLbBase } from '../../../lab/cluster/install.ts';
import { installLoadBalancer, installSpeakers, LAB_POOL_HOSTS } from '../../../lab/cluster/metallb.ts';
import { runningStatuses } from '../../../lab/cluster/pods.ts';
import { waitFor } from '../../../shared/clock.ts';

const ROUNDS = Number(process.env.ROUNDS ?? 2);
const NS = 'metallb-system';
const note = (msg: string) => process.stderr.write(`[bench-rollout] ${msg}\n`);

interface ContainerStatus {
  name: string;
  ready: boolean;
  state?: { running?: { startedAt: string } };
}
interface PodView {
  metadata: { name: string; uid: string; creationTimestamp: string };
  spec: {
    nodeName?: string;
    containers: { name: string }[];
    initContainers?: { name: string; restartPolicy?: string }[];
  };
  status?: {
    conditions?: { type: string; status: string; lastTransitionTime?: string }[];
    containerStatuses?: ContainerStatus[];
    initContainerStatuses?: ContainerStatus[];
  };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : (s[Math.floor((s.length - 1) / 2)] as number);
};
const round2 = (x: number) => Math.round(x * 100) / 100;

/** RSS of every drainguard sidecar process on this machine (the lab's nodes share its /proc). */
function sidecarRssMiB(): number[] {
  const out: number[] = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (!cmd.includes('/app/drainguard.mjs') || !cmd.includes('sidecar')) continue;
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m) out.push(Number(m[1]) / 1024);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

const c = await startCluster({ log: (l) => note(`cluster: ${l}`) });
try {
  const pods = async () =>
    (
      JSON.parse(await c.k(['get', 'pods', '-n', NS, '-l', 'component=speaker', '-o', 'json'])) as {
        items: PodView[];
      }
    ).items;
  await installMetalLbBase(c);
  await installDrainguard(c);
  await installSpeakers(c, { inject: false });
  // One VIP, as a user's cluster has some: one speaker per rollout hands it over.
  await installLoadBalancer(c, c.bed.addr4(LAB_POOL_HOSTS[0]));
  const nodes = c.nodes.length;

  const client = c.client();
  const listPods = async () =>
    (
      await client.get<{ items: PodView[] }>(`/api/v1/namespaces/${NS}/pods`, {
        query: { labelSelector: 'component=speaker' },
      })
    ).items;

  /**
   * One measured restart: seconds per node, and per node where the time went (old pod asked to
   * stop → gone, gone → new pod created, created → Ready; seen by polling every 0.1 s); with the
   * sidecar, its times to ready (its container's start → its Ready flag).
   */
  const restart = async () => {
    const before = new Set((await listPods()).map((p) => p.metadata.uid));
    const seen = new Map<
      string,
      { node: string; deleting?: number; gone?: number; created: number; ready?: number }
    >();
    const sidecarReady = new Map<string, number>();
    const t0 = performance.now();
    const now = () => (performance.now() - t0) / 1000;
    await c.k(['rollout', 'restart', '-n', NS, 'daemonset/speaker']);
    let done = false;
    const rolled = c.k(['rollout', 'status', '-n', NS, 'daemonset/speaker', '--timeout=300s']).finally(() => {
      done = true;
    });
    while (!done) {
      const ps = await listPods();
      const live = new Set(ps.map((p) => p.metadata.uid));
      for (const [uid, v] of seen) if (!live.has(uid) && v.gone === undefined) v.gone = now();
      for (const p of ps) {
        const uid = p.metadata.uid;
        const v = seen.get(uid) ?? { node: p.spec.nodeName ?? '', created: before.has(uid) ? 0 : now() };
        seen.set(uid, v);
        if ((p.metadata as { deletionTimestamp?: string }).deletionTimestamp && v.deleting === undefined)
          v.deleting = now();
        if (
          v.ready === undefined &&
          p.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True')
        )
          v.ready = now();
        const s = runningStatuses(p).find((x) => x.name === 'drainguard');
        if (!before.has(uid) && s?.ready && s.state?.running && !sidecarReady.has(uid))
          sidecarReady.set(uid, Date.now() - Date.parse(s.state.running.startedAt));
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    await rolled;
    const perNode = now() / nodes;
    const phases = { stopping: [] as number[], recreate: [] as number[], toReady: [] as number[] };
    for (const [uid, old] of seen) {
      if (!before.has(uid)) continue;
      const fresh = [...seen.entries()].find(([u, v]) => !before.has(u) && v.node === old.node)?.[1];
      if (old.deleting !== undefined && old.gone !== undefined) phases.stopping.push(old.gone - old.deleting);
      if (fresh && old.gone !== undefined) phases.recreate.push(fresh.created - old.gone);
      if (fresh?.ready !== undefined) phases.toReady.push(fresh.ready - fresh.created);
    }
    return { perNode, phases, sidecarToReady: [...sidecarReady.values()].map((ms) => ms / 1000) };
  };
  const phaseLine = (p: { stopping: number[]; recreate: number[]; toReady: number[] }) =>
    `stopping ${p.stopping.map((x) => x.toFixed(1)).join('/')} s, re-created after ${p.recreate.map((x) => x.toFixed(1)).join('/')} s, ready after ${p.toReady.map((x) => x.toFixed(1)).join('/')} s`;

  const plain: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const r = await restart();
    plain.push(r.perNode);
    note(`plain round ${i + 1}: ${r.perNode.toFixed(2)} s per node (${phaseLine(r.phases)})`);
  }
  await c.k(['label', 'namespace', NS, 'drainguard.io/inject=enabled']);
  await restart();
  await waitFor(
    'every speaker pod injected',
    async () => {
      const ps = await pods();
      // A native sidecar (kubelet 1.29+: the webhook's `auto` mode) is an init container.
      return (
        ps.length === nodes &&
        ps.every((p) =>
          [...p.spec.containers, ...(p.spec.initContainers ?? [])].some((x) => x.name === 'drainguard'),
        )
      );
    },
    { timeoutMs: 120_000 },
  );
  const injected: number[] = [];
  const toReady: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const r = await restart();
    injected.push(r.perNode);
    toReady.push(...r.sidecarToReady);
    note(
      `injected round ${i + 1}: ${r.perNode.toFixed(2)} s per node (${phaseLine(r.phases)}); sidecar ready after ${r.sidecarToReady.map((x) => x.toFixed(1)).join('/')} s`,
    );
  }
  // Idle: 30 s after the last rollout, as a user's cluster would be.
  await new Promise((r) => setTimeout(r, 30_000));
  const rss = sidecarRssMiB();
  const result = {
    bench: 'rollout',
    nodes,
    rounds: ROUNDS,
    plain_s_per_node: round2(median(plain)),
    injected_s_per_node: round2(median(injected)),
    ratio: round2(median(injected) / median(plain)),
    plain_rounds: plain.map(round2),
    injected_rounds: injected.map(round2),
    target_ratio: 1.5,
    sidecar_ready_s_median: round2(median(toReady)),
    sidecar_ready_s_max: round2(Math.max(...toReady)),
    sidecar_idle_rss_mib: rss.map(round2),
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  client.close();
} finally {
  await c.stop();
}
