// The drain part of make bench-api: one metallb-speaker sidecar as a real process (the built
// bundle, the injected node flags, in a memory cgroup with the injected limit, like its
// container), observe-only, among `nodes` Nodes of realistic size with a speaker pod each; it
// announces one VIP (a ServiceL2Status names its node). Its Node is cordoned: how much it reads
// and how much memory that takes. Observe-only labels nothing, so no new owner confirms and the
// handover runs until its budget is spent: every wide read it does in that time is counted.
// The time from cordon to fence needs a confirmed handover (not measured here).
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { KubeObject } from '../../../shared/kube/types.ts';
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
  /** LISTs of all Nodes from the cordon to the end of the handover budget (+10 s). */
  wide_lists: number;
  /** LISTs of the MetalLB namespace's pods (the speakers, by label) in the same time. */
  pod_lists: number;
  exited: string | null;
  memory_limit: string;
  memory_cgroup: boolean;
}

const METALLB_NS = NAMESPACES['metallb-speaker'];
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
    const pod = await client.create<Record<string, unknown>>(
      `/api/v1/namespaces/${METALLB_NS}/pods`,
      inj.pod,
    );
    await client.patch(
      `/api/v1/namespaces/${METALLB_NS}/pods/speaker-${node}/status`,
      { status: runningStatus(pod, '10.210.0.1') },
      'merge',
    );
    made.push(node);
  });
}

/** The VIP's Service and MetalLB's ServiceL2Status naming `node` as the announcer. */
async function announce(client: KubeClient, node: string): Promise<void> {
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
    // The handover budget (30 s by default) and 10 s more: the handover is given up by then.
    // VmHWM read as it goes: a process killed for its memory takes its figure with it.
    let peak = Number.NaN;
    await waitFor(
      'the handover budget',
      () => {
        if (exited === null) peak = statusOf(pid, 'VmHWM');
        return exited !== null || Date.now() - t0 > 40_000;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    await sleep(1_000);
    const agent = `drainguard-sidecar/${node}`;
    const lists = (await readAudit(s.auditLog)).filter(
      (r) => r.agent === agent && r.at >= t0 && r.verb === 'list',
    );
    // The informers' own lists carry a selector; the handover's read of every Node does not.
    const after = lists.filter((r) => !r.selected);
    const r1 = (x: number) => (Number.isNaN(x) ? null : Math.round(x * 10) / 10);
    return {
      nodes: made.length,
      peak_rss_mib: r1(peak),
      idle_rss_mib: r1(idle),
      wide_lists: after.filter((r) => r.path === '/api/v1/nodes').length,
      pod_lists: lists.filter((r) => r.path === `/api/v1/namespaces/${METALLB_NS}/pods`).length,
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
  }
}
