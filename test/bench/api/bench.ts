// make bench-api: what N sidecars cost a real kube-apiserver + etcd (lab/versions.env; lab/bed/control-plane.ts,
// audit log on). The sidecars are the product's own code on its in-cluster start path (service
// account token + CA files, KUBERNETES_SERVICE_HOST/PORT; lab/bed/pod.ts), each with the
// environment the webhook's planner injects (objects.ts), observe-only, host tools stubbed, each
// with its own ~13 KiB Node and its own pod. Background churn at a real cluster's rates
// (churn.ts) runs through every step, none of it on a sidecar's own objects.
//
// Steps, each a warm-up then a steady window of MINUTES:
//   0. baseline: churn, no sidecar (the API server's and etcd's own cost);
//   C. the check: COMPARE sidecars in one process next to COMPARE real processes (the built
//      bundle with the injected node flags), plus PROFILE_N sidecars of each other profile;
//      request counts per sidecar must agree within 10 %;
//   N. for each N: N metallb-speaker sidecars, up to HOST_SIZE per process;
//   D. for each size in DRAIN: one draining sidecar among that many Nodes (drain.ts).
// Counted from the audit log per sidecar (its user agent): requests by verb and resource,
// re-lists (a LIST of a view the sidecar also watches), 410s (HTTP ones from the audit log, and
// those inside a watch stream from the sidecar's own log: "watch failed; relisting"), standing
// watches; API server and etcd CPU seconds and RSS from /proc. Last line: one JSON object.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { startControlPlane } from '../../../lab/bed/control-plane.ts';
import { podAccess } from '../../../lab/bed/pod.ts';
import { stubTools } from '../../../lab/fake/stub-tools.ts';
import { putL2Config, waitForMetalLbResources } from '../../../lab/sim/speaker/objects.ts';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { KubeObject } from '../../../shared/kube/types.ts';
import { countPerSidecar, perSidecarHour, readAudit, type SidecarCounts } from './audit.ts';
import { Churn, inBatches } from './churn.ts';
import { type DrainResult, drainOnce } from './drain.ts';
import { consistentListSource, type ListSource } from './list-source.ts';
import {
  type BenchProfile,
  injectedPod,
  NAMESPACES,
  realisticNode,
  runningStatus,
  WORKLOAD_NS,
} from './objects.ts';

const env = process.env;
const num = (v: string | undefined, d: number) => (v === undefined || v === '' ? d : Number(v));
/** N sidecars per step (make passes N="" when unset: the default); N=0 runs no step. */
const STEPS = (env.N || '100,250,500,1000')
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const MINUTES = num(env.MINUTES, 10);
const WARMUP_MINUTES = num(env.WARMUP_MINUTES, 2);
const BASELINE_MINUTES = num(env.BASELINE_MINUTES, Math.min(MINUTES, 5));
const COMPARE = num(env.COMPARE, 25);
const PROFILE_N = num(env.PROFILE_N, 10);
/** Sidecars per process: ~1.5 MiB each in-process (a real process each is ~65 MiB). */
const HOST_SIZE = num(env.HOST_SIZE, 250);
const OTHER_NODES = num(env.OTHER_NODES, 50);
const PODS_PER_OTHER_NODE = 10;
/** The measurements: 3 Node and 3 Pod changes/s elsewhere in the cluster. */
const NODE_STATUS_PER_S = num(env.NODE_STATUS_PER_S, 3);
const POD_STATUS_PER_S = num(env.POD_STATUS_PER_S, 3);
const COMPONENT_LEASES = 10;
/** Cluster sizes for the drain part (make passes "" when unset: the default); DRAIN=0 skips it. */
const DRAIN = (env.DRAIN || '1000,5000')
  .split(',')
  .map(Number)
  .filter((n) => n > 0);

const ROOT = new URL('../../..', import.meta.url).pathname;
const BUNDLE = join(ROOT, 'dist/drainguard.mjs');
const note = (msg: string) =>
  process.stderr.write(`[bench-api ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const r1 = (x: number) => Math.round(x * 10) / 10;
const r3 = (x: number) => Math.round(x * 1000) / 1000;
if (!existsSync(BUNDLE)) throw new Error(`${BUNDLE} missing: run make build first`);

// --- /proc --------------------------------------------------------------------------------

const TICKS = 100; // USER_HZ on Linux
const cpuSeconds = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / TICKS;
};
const rssMiB = (pid: number) => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
};

// --- the cluster ---------------------------------------------------------------------------

const SA = 'system:serviceaccount:drainguard-bench:sidecar';
const cpDir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'drainguard-api-'));
const cp = await startControlPlane({
  dir: cpDir,
  auditLog: true,
  users: [{ name: SA, groups: ['system:serviceaccounts', 'system:serviceaccounts:drainguard-bench'] }],
});
const audit = cp.auditLogPath!;
const client = cp.client();
const procs: ChildProcess[] = [];

interface Sidecar {
  node: string;
  profile: BenchProfile;
  env: Record<string, string>;
  command: string[];
}

async function k(args: string[]) {
  const r = await cp.kubectl(args);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
}

/** Namespaces, MetalLB's CRDs and configuration, the sidecars' identity (a service account). */
async function setUp(): Promise<void> {
  for (const ns of [...new Set(Object.values(NAMESPACES)), WORKLOAD_NS])
    await client.create('/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: ns },
    });
  for (const file of ['ipaddresspool', 'l2advertisement', 'servicel2status'])
    await k(['apply', '--validate=false', '-f', join(ROOT, `lab/sim/speaker/crds/${file}.yaml`)]);
  await waitForMetalLbResources(client, ['ipaddresspools', 'l2advertisements', 'servicel2statuses']);
  await putL2Config(client, NAMESPACES['metallb-speaker'], ['192.0.2.100-192.0.2.120']);
  // What the sidecar may do is manifests/sidecar-rbac's business; here it only must be a service
  // account, so API priority and fairness treats it as one (workload-low), not as an admin.
  await k([
    'create',
    'clusterrolebinding',
    'drainguard-bench-sidecar',
    '--clusterrole=cluster-admin',
    `--user=${SA}`,
  ]);
}

/** A Node and the injected pod (Running) for each sidecar; workload pods on the other nodes. */
async function populate(
  sidecars: { node: string; profile: BenchProfile }[],
  others: string[],
): Promise<Sidecar[]> {
  const nodes = [...sidecars.map((s) => s.node), ...others];
  await inBatches(
    nodes.map((n, i) => [n, i] as const),
    16,
    ([n, i]) => client.create('/api/v1/nodes', realisticNode(n, i)),
  );
  const size = (await client.get<KubeObject>(`/api/v1/nodes/${nodes[0]}`, {
    text: true,
  })) as unknown as string;
  note(`${nodes.length} Nodes, ${(size.length / 1024).toFixed(1)} KiB each as served`);
  const out: Sidecar[] = [];
  await inBatches(
    sidecars.map((s, i) => [s, i] as const),
    16,
    async ([s, i]) => {
      const ip = `10.200.${i >> 8}.${i & 255}`;
      const inj = injectedPod(s.profile, `${s.profile.split('-')[0]}-${s.node}`, s.node);
      const ns = NAMESPACES[s.profile];
      const made = await client.create<KubeObject & Record<string, unknown>>(
        `/api/v1/namespaces/${ns}/pods`,
        inj.pod,
      );
      await client.patch(
        `/api/v1/namespaces/${ns}/pods/${made.metadata?.name}/status`,
        { status: runningStatus(made, ip) },
        'merge',
      );
      out.push({
        node: s.node,
        profile: s.profile,
        env: inj.env({ uid: made.metadata?.uid ?? '', podIPs: [ip] }),
        command: inj.command,
      });
    },
  );
  const workload = others.flatMap((n) =>
    Array.from({ length: PODS_PER_OTHER_NODE }, (_, j) => `${n}-app-${j}`),
  );
  await inBatches(workload, 16, async (name) => {
    const node = name.replace(/-app-\d+$/, '');
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: WORKLOAD_NS, labels: { app: name.replace(/^.*-app-/, 'app-') } },
      spec: { nodeName: node, containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
    };
    const made = await client.create<Record<string, unknown>>(`/api/v1/namespaces/${WORKLOAD_NS}/pods`, pod);
    await client.patch(
      `/api/v1/namespaces/${WORKLOAD_NS}/pods/${name}/status`,
      { status: runningStatus(made, '10.201.0.1') },
      'merge',
    );
  });
  return out;
}

// --- running sidecars ----------------------------------------------------------------------

const stubs = stubTools(cpDir);
const pod = podAccess(cp, cp.userTarget(SA).token);

/** Re-lists after a 410 inside a watch stream, as each sidecar logged them (node, time). */
const relistLogs: { node: string; at: number }[] = [];
function readLogs(p: ChildProcess, nodeOf: (line: Record<string, unknown>) => string | undefined): void {
  createInterface({ input: p.stdout! }).on('line', (line) => {
    if (!line.includes('relisting')) return;
    try {
      const l = JSON.parse(line) as Record<string, unknown>;
      const node = nodeOf(l);
      if (l.msg === 'watch failed; relisting' && node)
        relistLogs.push({ node, at: Date.parse(String(l.time)) });
    } catch {}
  });
}

interface Group {
  pids: number[];
  stop(): Promise<void>;
}

/**
 * Ports for the sidecars' HTTP servers, counted up below the kernel's ephemeral range (32768+):
 * a port free a moment ago may by now be the local end of someone's API connection.
 */
let lastPort = 20_000;
async function nextPort(): Promise<number> {
  for (;;) {
    const port = ++lastPort;
    const free = await new Promise<boolean>((resolve) => {
      const srv = createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

async function sidecarEnv(sidecar: Record<string, string>): Promise<Record<string, string>> {
  return {
    PATH: `${stubs}:${env.PATH}`,
    ...pod.env,
    ...sidecar,
    // Many on one host: each its own port, on loopback; nothing is changed.
    DRAINGUARD_PORT: String(await nextPort()),
    DRAINGUARD_BIND_ADDRESS: '127.0.0.1',
    DRAINGUARD_OBSERVE_ONLY: 'true',
  };
}

/** Sidecars in processes of up to HOST_SIZE each (test/bench/api/host.ts). */
async function inProcess(sidecars: Sidecar[]): Promise<Group> {
  const pids: number[] = [];
  const children: ChildProcess[] = [];
  for (let i = 0; i < sidecars.length; i += HOST_SIZE) {
    const envs = [];
    for (const s of sidecars.slice(i, i + HOST_SIZE)) envs.push(await sidecarEnv(s.env));
    const file = join(cpDir, `host-${Date.now()}-${i}.json`);
    writeFileSync(file, JSON.stringify(envs));
    const [bin, ...args] = pod.wrap([
      process.execPath,
      '--max-old-space-size=4096',
      join(ROOT, 'test/bench/api/host.ts'),
      file,
    ]) as [string, ...string[]];
    const child = spawn(bin, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: `${stubs}:${env.PATH}`, ...pod.env },
    });
    procs.push(child);
    children.push(child);
    readLogs(child, (l) => l.node as string | undefined);
    const ready = new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stderr! }).on('line', (line) => {
        if (line.startsWith('ready ')) resolve();
        else process.stderr.write(`[host] ${line}\n`);
      });
      child.once('exit', (code) => reject(new Error(`a sidecar host exited with ${code}`)));
    });
    await ready;
    pids.push(child.pid ?? 0);
  }
  return { pids, stop: () => stopAll(children) };
}

/**
 * One sidecar as its own process, as in its pod: the built bundle with the injected node flags;
 * resolves once /readyz answers.
 */
async function startProcess(command: string[], sidecar: Record<string, string>): Promise<ChildProcess> {
  const cmd = command.map((a) =>
    a === 'node' ? process.execPath : a.endsWith('drainguard.mjs') ? BUNDLE : a,
  );
  const [bin, ...args] = pod.wrap(cmd) as [string, ...string[]];
  const e = await sidecarEnv(sidecar);
  const node = e.DRAINGUARD_NODE_NAME;
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'inherit'], env: e });
  procs.push(child);
  readLogs(child, () => node);
  await waitFor(
    `sidecar ${node} /readyz`,
    async () => {
      if (child.exitCode !== null) throw new Error(`sidecar ${node} exited with ${child.exitCode}`);
      return (
        await fetch(`http://127.0.0.1:${e.DRAINGUARD_PORT}/readyz`, { signal: AbortSignal.timeout(500) })
      ).ok;
    },
    { timeoutMs: 60_000, intervalMs: 50 },
  );
  return child;
}

/** One real process per sidecar. */
async function asProcesses(sidecars: Sidecar[]): Promise<Group> {
  const children: ChildProcess[] = [];
  for (const s of sidecars) children.push(await startProcess(s.command, s.env));
  return { pids: children.map((c) => c.pid ?? 0), stop: () => stopAll(children) };
}

/**
 * SIGKILL, as a node that dies would: SIGTERM would run the pre-stop handover of every
 * metallb-speaker sidecar (its pod going away), which is not idle cost.
 */
async function stopAll(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          c.once('exit', () => resolve());
          c.kill('SIGKILL');
        }),
    ),
  );
}

// --- one step ------------------------------------------------------------------------------

interface Window {
  from: number;
  to: number;
  apiserverCpuS: number;
  etcdCpuS: number;
  apiserverRssMiB: number;
  etcdRssMiB: number;
  /** RSS of the sidecars' processes at the end (MiB), by group. */
  groupRssMiB: Record<string, number>;
}

/** Warm-up, then a steady window: CPU seconds of the API server and etcd over it, RSS at its end. */
async function steady(minutes: number, groups: Record<string, Group>): Promise<Window> {
  // Start-up lists and the churn's first writes settle before anything is counted.
  note(`warm-up ${WARMUP_MINUTES} min`);
  await sleep(WARMUP_MINUTES * 60_000);
  note(`steady window ${minutes} min`);
  const a0 = cpuSeconds(cp.apiserverPid);
  const e0 = cpuSeconds(cp.etcdPid);
  const from = Date.now();
  await sleep(minutes * 60_000);
  const to = Date.now();
  const groupRssMiB: Record<string, number> = {};
  for (const [name, g] of Object.entries(groups))
    groupRssMiB[name] = r1(g.pids.reduce((s, p) => s + rssMiB(p), 0));
  return {
    from,
    to,
    apiserverCpuS: r1(cpuSeconds(cp.apiserverPid) - a0),
    etcdCpuS: r1(cpuSeconds(cp.etcdPid) - e0),
    apiserverRssMiB: r1(rssMiB(cp.apiserverPid)),
    etcdRssMiB: r1(rssMiB(cp.etcdPid)),
    groupRssMiB,
  };
}

/** Per-sidecar-hour figures of one set of sidecars over a window; 410s from audit and logs. */
async function figures(nodes: string[], w: Window) {
  // The audit log is written as requests complete: a moment for the last ones of the window.
  await sleep(1_000);
  const counts = countPerSidecar(await readAudit(audit), nodes, w.from, w.to);
  const set = new Set(nodes);
  for (const r of relistLogs)
    if (set.has(r.node) && r.at >= w.from && r.at < w.to) counts.get(r.node)!.gone++;
  return perSidecarHour([...counts.values()] as SidecarCounts[], w.to - w.from);
}

// --- the run -------------------------------------------------------------------------------

const maxN = Math.max(0, ...STEPS);
const names = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(4, '0')}`);
const plan = {
  compareIn: names('cmp-in', COMPARE),
  compareProc: names('cmp-proc', COMPARE),
  lease: names('lease', PROFILE_N),
  netfilter: names('nf', PROFILE_N),
  steps: names('mlb', maxN),
  others: names('other', OTHER_NODES),
};
const result: Record<string, unknown> = { bench: 'api' };
/** Parts that failed: the others' figures are still reported. */
const errors: string[] = [];
async function attempt(what: string, part: () => Promise<void>): Promise<void> {
  try {
    await part();
  } catch (e) {
    errors.push(`${what}: ${(e as Error).message}`);
    note(`${what} failed: ${(e as Error).stack}`);
    await stopAll(procs);
  }
}
try {
  await setUp();
  note('creating Nodes and pods');
  const sidecars = await populate(
    [
      ...[...plan.compareIn, ...plan.compareProc, ...plan.steps].map((node) => ({
        node,
        profile: 'metallb-speaker' as const,
      })),
      ...plan.lease.map((node) => ({ node, profile: 'skupper-router' as const })),
      ...plan.netfilter.map((node) => ({ node, profile: 'netfilter-cleanup' as const })),
    ],
    plan.others,
  );
  const of = (nodes: string[]) => {
    const set = new Set(nodes);
    return sidecars.filter((s) => set.has(s.node));
  };
  const churn = new Churn(client as KubeClient, {
    nodes: [...sidecars.map((s) => s.node), ...plan.others],
    otherNodes: plan.others,
    pods: plan.others.flatMap((n) => Array.from({ length: PODS_PER_OTHER_NODE }, (_, j) => `${n}-app-${j}`)),
    nodeStatusPerSecond: NODE_STATUS_PER_S,
    podStatusPerSecond: POD_STATUS_PER_S,
    componentLeases: [
      { namespace: NAMESPACES['skupper-router'], name: 'skupper-site-leader' },
      ...Array.from({ length: COMPONENT_LEASES - 1 }, (_, i) => ({
        namespace: 'kube-system',
        name: `component-${i}`,
      })),
    ],
  });
  await churn.start();
  note(
    `churn: ${sidecars.length + plan.others.length} node Leases every 10 s, ${COMPONENT_LEASES} leader Leases every 2 s, ${NODE_STATUS_PER_S} Node and ${POD_STATUS_PER_S} pod status changes/s`,
  );

  note('step 0: churn only');
  const base = await steady(BASELINE_MINUTES, {});
  const perMin = (w: Window, cpu: number) => cpu / ((w.to - w.from) / 60_000);
  const cpuS: Record<string, number> = { 0: base.apiserverCpuS };
  const rss: Record<string, number> = { 0: base.apiserverRssMiB };
  const etcdCpu: Record<string, number> = { 0: base.etcdCpuS };
  const etcdRss: Record<string, number> = { 0: base.etcdRssMiB };
  const cpuPerMin: Record<string, number> = { 0: r3(perMin(base, base.apiserverCpuS)) };

  let check: Record<string, unknown> = {};
  const perProfile: Record<string, unknown> = {};
  if (COMPARE > 0 || PROFILE_N > 0)
    await attempt('the check', async () => {
      note(
        `step C: ${COMPARE} in one process, ${COMPARE} real processes, ${PROFILE_N} of each other profile`,
      );
      const groups: Record<string, Group> = {};
      const started = Date.now();
      groups.in_process = await inProcess([...of(plan.compareIn), ...of(plan.lease), ...of(plan.netfilter)]);
      if (COMPARE > 0) groups.processes = await asProcesses(of(plan.compareProc));
      const w = await steady(MINUTES, groups);
      await Promise.all(Object.values(groups).map((g) => g.stop()));
      const inProc = await figures(plan.compareIn, w);
      const asProc = await figures(plan.compareProc, w);
      const speaker = await figures([...plan.compareIn, ...plan.compareProc], w);
      // Over their whole life (start-up lists and watches included, up to the window's end): an
      // idle window alone may hold too few requests to compare.
      const life = { ...w, from: started };
      const inLife = await figures(plan.compareIn, life);
      const procLife = await figures(plan.compareProc, life);
      const ratio = procLife.requests > 0 ? inLife.requests / procLife.requests : Number.NaN;
      const windowRatio =
        asProc.requests > 0 ? inProc.requests / asProc.requests : inProc.requests === 0 ? 1 : Number.NaN;
      check = {
        in_process: inProc,
        processes: asProc,
        in_process_lifetime: inLife,
        processes_lifetime: procLife,
        ratio: r3(ratio),
        window_ratio: r3(windowRatio),
        // Over the life; the idle window's few requests (watches re-opened at random 5–10 min) are noisy.
        within_10_percent: Math.abs(ratio - 1) <= 0.1,
        process_rss_mib_per_sidecar: COMPARE ? r1((w.groupRssMiB.processes ?? 0) / COMPARE) : null,
        apiserver_cpu_s: w.apiserverCpuS,
      };
      const lease = await figures(plan.lease, w);
      const nf = await figures(plan.netfilter, w);
      for (const [name, f] of [
        ['metallb-speaker', speaker],
        ['skupper-router', lease],
        ['netfilter-cleanup', nf],
      ] as const)
        perProfile[name] = {
          requests_per_sidecar_hour: f.requests,
          relists_per_sidecar_hour: f.relists,
          '410_per_sidecar_hour': f.gone,
          standing_watches: f.standingWatches,
          by_verb_resource: f.byVerbResource,
        };
      note(
        `check: in-process ${inProc.requests}/h, processes ${asProc.requests}/h per sidecar (ratio ${r3(ratio)})`,
      );
      note(JSON.stringify({ check, per_profile: perProfile }));
    });

  const steps: Record<string, unknown> = {};
  for (const n of STEPS)
    await attempt(`step N=${n}`, async () => {
      note(`step N=${n}`);
      const nodes = plan.steps.slice(0, n);
      const g = await inProcess(of(nodes));
      const w = await steady(MINUTES, { sidecars: g });
      await g.stop();
      const f = await figures(nodes, w);
      cpuS[n] = w.apiserverCpuS;
      rss[n] = w.apiserverRssMiB;
      etcdCpu[n] = w.etcdCpuS;
      etcdRss[n] = w.etcdRssMiB;
      cpuPerMin[n] = r3(perMin(w, w.apiserverCpuS));
      steps[n] = {
        ...f,
        apiserver_cpu_ratio_to_baseline: r3(perMin(w, w.apiserverCpuS) / perMin(base, base.apiserverCpuS)),
        host_rss_mib_per_sidecar: r1((w.groupRssMiB.sidecars ?? 0) / n),
      };
      note(
        `N=${n}: ${f.requests} requests, ${f.relists} re-lists, ${f.gone} 410s per sidecar-hour; API server ${w.apiserverCpuS} CPU s`,
      );
      note(JSON.stringify({ n, ...(steps[n] as object), apiserver_rss_mib: rss[n], etcd_cpu_s: etcdCpu[n] }));
    });
  // The drain part: one draining sidecar among DRAIN Nodes (each a size in turn; growing).
  const drains: DrainResult[] = [];
  const made: string[] = [];
  for (const total of DRAIN) {
    try {
      drains.push(await drainOnce({ client, auditLog: audit, start: startProcess, note }, made, total));
      note(`drain among ${total}: ${JSON.stringify(drains.at(-1))}`);
    } catch (e) {
      note(`drain among ${total} failed: ${(e as Error).stack}`);
      break;
    }
  }
  // Where the sidecar's consistent lists are served from, among the largest drain's Nodes.
  let listSource: ListSource | null = null;
  try {
    listSource = await consistentListSource(client);
    note(`consistent lists of ${made.length + OTHER_NODES} Nodes: ${JSON.stringify(listSource)}`);
  } catch (e) {
    note(`list source failed: ${(e as Error).message}`);
  }
  churn.stop();

  // The headline: the metallb-speaker profile of the largest step run, else of the check.
  const last = (STEPS.length ? steps[STEPS[STEPS.length - 1]!] : perProfile['metallb-speaker']) as
    | { requests?: number; relists?: number; gone?: number; requests_per_sidecar_hour?: number }
    | undefined;
  const speaker = perProfile['metallb-speaker'] as Record<string, number> | undefined;
  Object.assign(result, {
    short_run: MINUTES < 10,
    minutes: MINUTES,
    warmup_minutes: WARMUP_MINUTES,
    idle_requests_per_sidecar_hour: last?.requests ?? speaker?.requests_per_sidecar_hour ?? null,
    idle_relists_per_sidecar_hour: last?.relists ?? speaker?.relists_per_sidecar_hour ?? null,
    idle_410_per_sidecar_hour: last?.gone ?? speaker?.['410_per_sidecar_hour'] ?? null,
    per_profile: perProfile,
    apiserver_cpu_s: cpuS,
    apiserver_cpu_s_per_min: cpuPerMin,
    apiserver_rss_mib: rss,
    etcd_cpu_s: etcdCpu,
    etcd_rss_mib: etcdRss,
    steps,
    check,
    churn: { ...churn.stats, node_status_per_s: NODE_STATUS_PER_S, pod_status_per_s: POD_STATUS_PER_S },
    drain_nodes: drains.length ? drains.map((d) => d.nodes) : null,
    drain_peak_rss_mib: drains.length
      ? Object.fromEntries(drains.map((d) => [d.nodes, d.peak_rss_mib]))
      : null,
    drain_wide_lists: drains.length ? Object.fromEntries(drains.map((d) => [d.nodes, d.wide_lists])) : null,
    // Cordon → the Node's annotation says fenced: observe-only decides as it would, the bench
    // confirming as the new owner's MetalLB (drain.ts).
    drain_fence_s: drains.length ? Object.fromEntries(drains.map((d) => [d.nodes, d.fence_s])) : null,
    drains,
    consistent_list_source: listSource,
    errors,
  });
} finally {
  await stopAll(procs);
  client.close();
  await cp.stop();
  if (!env.KEEP_AUDIT) rmSync(cpDir, { recursive: true, force: true });
}
process.stdout.write(`${JSON.stringify(result)}\n`);
if (errors.length) process.exitCode = 1;
if (result.check && (result.check as { within_10_percent?: boolean }).within_10_percent === false) {
  note('in-process and real-process sidecars differ by more than 10 %');
  process.exitCode = 1;
}
