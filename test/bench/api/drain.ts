// The drain part of make bench-api: one metallb-speaker sidecar as a real process (the built
// bundle, the injected node flags, in a memory cgroup with the injected limit, like its
// container), observe-only, among `nodes` Nodes of realistic size with a speaker pod each; it
// announces one VIP (a ServiceL2Status names its node). Its Node is cordoned: how much it reads,
// how much memory that takes, and how long until it decides to fence.
//
// The fence time: observe-only labels nothing and installs nothing, but it runs the handover's
// decisions as they would be taken (the label simulated) and publishes each phase in its Node's
// `drainguard.io/l2-handover` annotation. This bench plays MetalLB on another node: once the
// annotation says `awaiting-confirmation` it writes that node's ServiceL2Status for the VIP (as
// the new owner's speaker would); the sidecar confirms and decides to fence, and the annotation
// says `fenced`. `fence_s` is the time from the cordon to that annotation, read every 100 ms (so
// the bench's own reaction, ~0.1-0.2 s, is in it, the same at every size). If nothing fences,
// the handover runs until its budget is spent (40 s watched).
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { KubeObject, Node } from '../../../shared/kube/types.ts';
import { parseL2State } from '../../../shared/l2-state.ts';
import { L2_STATE_ANNOTATION } from '../../../shared/names.ts';
import { readAudit } from './audit.ts';
import { inBatches } from './churn.ts';
import { injectedPod, NAMESPACES, realisticNode, runningStatus } from './objects.ts';

export interface DrainSetup {
  client: KubeClient;
  auditLog: string;
  /** Runs the injected command as in its pod (service account, env, observe-only) until /readyz answers. */
  start(cmd: string[], env: Record<string, string>): Promise<ChildProcess>;
  note(msg: string): void;
}

export interface DrainResult {
  nodes: number;
  peak_rss_mib: number | null;
  idle_rss_mib: number | null;
  /** Whole LISTs of all Nodes (a paged list counts once) from the cordon until the end. */
  wide_lists: number;
  /** Their requests (pages). */
  wide_list_pages: number;
  /** Whole LISTs of the MetalLB namespace's pods (no selector) in the same time. */
  pod_lists: number;
  /** Cordon → the Node's annotation says `fenced` (s); null when nothing fenced. */
  fence_s: number | null;
  /** The last phase the annotation showed. */
  last_phase: string | null;
  /** Whether the bench confirmed as MetalLB (DRAIN_CONFIRM). */
  confirmed: boolean;
  exited: string | null;
  memory_limit: string;
  memory_cgroup: boolean;
}

const METALLB_NS = NAMESPACES['metallb-speaker'];
/**
 * DRAIN_CONFIRM=0: nobody takes the VIP over, so the handover runs its whole budget (then gives
 * up) and reads everything it reads in a long handover: the worst case for its memory and lists.
 */
const CONFIRM = process.env.DRAIN_CONFIRM !== '0';
const SPEAKER_DAEMONSET = {
  apiVersion: 'apps/v1',
  kind: 'DaemonSet',
  name: 'speaker',
  uid: '5f0c6c1e-0000-4000-8000-00000000da75',
  controller: true,
};
const VIP = '192.0.2.100';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const statusOf = (pid: number, field: string) => {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
};
const bytes = (q: string) => {
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(q);
  if (!m) throw new Error(`memory limit ${q}: not a quantity this bench reads`);
  return Number(m[1]) * { '': 1, Ki: 1024, Mi: 1 << 20, Gi: 1 << 30 }[m[2] ?? '']!;
};

/**
 * A memory cgroup (v1) below this process's, limited like the container: `wrap` starts a command
 * in it (its pid joins before exec, so every page counts). Undefined where that is not possible.
 */
function memoryCgroup(limit: string): { wrap(cmd: string[]): string[]; remove(): void } | undefined {
  const own = /^\d+:memory:(.*)$/m.exec(readFileSync('/proc/self/cgroup', 'utf8'))?.[1];
  if (own === undefined) return undefined;
  const dir = `/sys/fs/cgroup/memory${own}/drainguard-bench-${process.pid}`;
  const remove = () => {
    try {
      rmdirSync(dir);
    } catch {}
  };
  try {
    mkdirSync(dir, { recursive: true });
    writeFileSync(`${dir}/memory.limit_in_bytes`, String(bytes(limit)));
  } catch {
    remove();
    return undefined;
  }
  return { wrap: (cmd) => ['sh', '-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', dir, ...cmd], remove };
}

/** Nodes drain-0000… (and a Ready speaker pod on each) until `total` exist. */
async function grow(client: KubeClient, made: string[], total: number): Promise<void> {
  const start = made.length;
  const add = Array.from(
    { length: Math.max(0, total - start) },
    (_, i) => `drain-${String(start + i).padStart(5, '0')}`,
  );
  await inBatches(add, 16, async (node) => {
    await client.create('/api/v1/nodes', realisticNode(node, 60_000 + made.length));
    const inj = injectedPod('metallb-speaker', `speaker-${node}`, node);
    // Pods of one DaemonSet, as MetalLB's speakers are (the handover reads them all: a speaker
    // of the same DaemonSet, Ready, makes a node a candidate). No controller runs to collect them.
    const meta = inj.pod.metadata as Record<string, unknown>;
    const pod = await client.create<Record<string, unknown>>(`/api/v1/namespaces/${METALLB_NS}/pods`, {
      ...inj.pod,
      metadata: { ...meta, ownerReferences: [SPEAKER_DAEMONSET] },
    });
    await client.patch(
      `/api/v1/namespaces/${METALLB_NS}/pods/speaker-${node}/status`,
      { status: runningStatus(pod, '10.210.0.1') },
      'merge',
    );
    made.push(node);
  });
}

/** The VIP's Service and MetalLB's ServiceL2Status naming `node` as the announcer. */
export async function announce(client: KubeClient, node: string): Promise<void> {
  const svcs = `/api/v1/namespaces/${METALLB_NS}/services`;
  await client
    .create(svcs, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: METALLB_NS },
      spec: { type: 'LoadBalancer', ports: [{ port: 80, targetPort: 8080 }] },
    })
    .catch(() => undefined);
  const svc = await client.get<KubeObject>(`${svcs}/web`);
  await client.replace(`${svcs}/web/status`, {
    ...svc,
    status: { loadBalancer: { ingress: [{ ip: VIP }] } },
  });
  const base = `/apis/metallb.io/v1beta1/namespaces/${METALLB_NS}/servicel2statuses`;
  const name = `l2-${node}`;
  const made = await client.create<KubeObject>(base, {
    apiVersion: 'metallb.io/v1beta1',
    kind: 'ServiceL2Status',
    metadata: {
      name,
      namespace: METALLB_NS,
      labels: {
        'metallb.io/node': node,
        'metallb.io/service-name': 'web',
        'metallb.io/service-namespace': METALLB_NS,
      },
    },
  });
  await client.replace(`${base}/${name}/status`, {
    ...made,
    status: { node, serviceName: 'web', serviceNamespace: METALLB_NS, interfaces: [] },
  });
}

/** One drain at `total` Nodes; `made` carries the Nodes made so far (the next drain adds to them). */
export async function drainOnce(s: DrainSetup, made: string[], total: number): Promise<DrainResult> {
  const { client } = s;
  const first = made.length === 0;
  await grow(client, made, total);
  const node = made[0]!;
  if (first) await announce(client, node);
  s.note(`drain among ${made.length} Nodes (a speaker pod each): ${node} is cordoned`);
  const inj = injectedPod('metallb-speaker', `speaker-${node}`, node);
  const pod = await client.get<KubeObject>(`/api/v1/namespaces/${METALLB_NS}/pods/speaker-${node}`);
  const env = inj.env({ uid: pod.metadata?.uid ?? '', podIPs: ['10.210.0.1'] });
  const cgroup = memoryCgroup(inj.memoryLimit);
  const child = await s.start(cgroup ? cgroup.wrap(inj.command) : inj.command, env);
  let exited: string | null = null;
  child.once('exit', (code, signal) => {
    exited = signal ? `signal ${signal}` : `code ${code}`;
  });
  const pid = child.pid ?? 0;
  try {
    await sleep(10_000);
    const idle = exited ? Number.NaN : statusOf(pid, 'VmRSS');
    const t0 = Date.now();
    await client.patch(`/api/v1/nodes/${node}`, { spec: { unschedulable: true } }, 'merge');
    // Until the annotation says fenced (then 3 s more), or the budget (30 s) and 10 s more.
    // VmHWM read as it goes: a process killed for its memory takes its figure with it.
    let peak = Number.NaN;
    let fencedAt: number | undefined;
    let lastPhase: string | null = null;
    let tookOver = false;
    await waitFor(
      'the fence or the handover budget',
      async () => {
        if (exited === null) peak = statusOf(pid, 'VmHWM');
        if (exited !== null || Date.now() - t0 > 40_000) return true;
        if (fencedAt !== undefined) return Date.now() - fencedAt > 3_000;
        const n = await client
          .get<Node>(`/api/v1/nodes/${node}`, { timeoutMs: 5_000 })
          .catch(() => undefined);
        const phase = parseL2State(n?.metadata?.annotations?.[L2_STATE_ANNOTATION])?.phase;
        lastPhase = phase ?? lastPhase;
        if (phase === 'awaiting-confirmation' && !tookOver && CONFIRM) {
          // MetalLB on another node takes the VIP over: its ServiceL2Status.
          tookOver = true;
          await announce(client, made[1]!);
        }
        if (phase === 'fenced') fencedAt = Date.now();
        return false;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    await sleep(1_000);
    const agent = `drainguard-sidecar/${node}`;
    const lists = (await readAudit(s.auditLog)).filter(
      (r) => r.agent === agent && r.at >= t0 && r.verb === 'list' && !r.selected,
    );
    // The informers' own lists carry a selector; the handover's reads of every Node and pod do
    // not. A paged list is one list of several requests: its first page starts it.
    const nodeLists = lists.filter((r) => r.path === '/api/v1/nodes');
    const r1 = (x: number) => (Number.isNaN(x) ? null : Math.round(x * 10) / 10);
    return {
      nodes: made.length,
      peak_rss_mib: r1(peak),
      idle_rss_mib: r1(idle),
      wide_lists: nodeLists.filter((r) => !r.continued).length,
      wide_list_pages: nodeLists.length,
      pod_lists: lists.filter((r) => r.path === `/api/v1/namespaces/${METALLB_NS}/pods` && !r.continued)
        .length,
      fence_s: fencedAt === undefined ? null : Math.round((fencedAt - t0) / 100) / 10,
      last_phase: lastPhase,
      confirmed: tookOver,
      exited,
      memory_limit: inj.memoryLimit,
      memory_cgroup: cgroup !== undefined,
    };
  } finally {
    child.kill('SIGKILL');
    await new Promise((r) =>
      child.exitCode !== null || child.signalCode !== null ? r(undefined) : child.once('exit', r),
    );
    cgroup?.remove();
    await client.patch(`/api/v1/nodes/${node}`, { spec: { unschedulable: false } }, 'merge');
    // The next drain's new owner writes its status afresh (a lingering one confirms nothing).
    await client
      .delete(`/apis/metallb.io/v1beta1/namespaces/${METALLB_NS}/servicel2statuses/l2-${made[1]}`)
      .catch(() => undefined);
  }
}
