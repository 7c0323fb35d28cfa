// The nemesis (I/O): each fault kind the runner implements, injected on the lab cluster and
// lifted again. A fault returns its "lift", run when its duration is over or, at the latest, when
// the trial settles; every lift is safe to run twice. The kinds missing here (IMPLEMENTED lists
// the others) are never planned.
import { spawn } from 'node:child_process';
import { openSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { killAndWait, pidAlive } from '../../lab/bed/proc.ts';
import type { Cluster } from '../../lab/cluster/cluster.ts';
import { memberList, memberRemove } from '../../lab/cluster/etcd-cluster.ts';
import type { LabNode } from '../../lab/cluster/node.ts';
import { LIVENESS_FAIL_FILE, type PodView, statuses } from '../../lab/cluster/robustness-scene.ts';
import { waitFor } from '../../shared/clock.ts';
import { SIDECAR_NAME } from '../../shared/names.ts';
import { apiProxy } from '../e2e/bed/api-proxy.ts';
import type { FaultKind, PlannedFault } from './plan.ts';

/** The kinds this runner injects on the lab's single control plane. */
export const IMPLEMENTED: FaultKind[] = [
  'sidecar-sigkill',
  'pod-delete',
  'speaker-restart',
  'liveness-failure',
  'api-server-restart',
  'api-429',
  'api-path-drop',
  'etcd-pause',
  'second-cordon',
  'uncordon-recordon',
  'kubelet-restart',
  'webhook-down',
];

/**
 * On the HA control plane (CONTROL_PLANES=3): the stale API server too; not `api-path-drop` nor
 * `api-429`, which aim at one API server's address (the first member's) where the nodes' traffic
 * now spreads over three. `api-server-restart` stops every API server; `etcd-pause` the first
 * member's etcd.
 */
export const IMPLEMENTED_HA: FaultKind[] = [
  ...IMPLEMENTED.filter((k) => k !== 'api-path-drop' && k !== 'api-429'),
  'stale-api-server',
];

export interface Target {
  c: Cluster;
  /** The node the action acts on. */
  node: string;
  /** Another node (second cordon). */
  other: string;
  /** The pod the action acts on (the speaker answering for the VIP, or the Lease holder's). */
  pod: () => Promise<PodView | undefined>;
  /** The speaker pod on the acting node. */
  speaker: () => Promise<PodView | undefined>;
  /** "pod/container" the nemesis killed: their restarts are expected. */
  injectedRestarts: string[];
  note(line: string): void;
}

export type Lift = () => Promise<void>;

/** The fault found nothing to strike (its pod already gone or its container stopped): not injected. */
export class NotInjected extends Error {}
const nothing: Lift = async () => {};

/**
 * An exec refused because the container is not running (killed, its restart not begun: SEED=112
 * TRIAL=227, a liveness fault 0.3 s after a speaker kill): nothing to strike, not a runner error.
 */
export const execFoundNoContainer = (stderr: string): boolean =>
  /container not found|container not running|cannot exec in a stopped state/i.test(stderr);
/** Longest a trial's API outages can hold back a kubelet's status report (each ≤ 30 s, two may follow each other), with room for its resync. */
const RESTART_REPORT_WAIT_MS = 90_000;

/** Kills one container of a pod through its node's containerd (the kubelet then restarts it). */
async function killContainer(t: Target, pod: PodView | undefined, container: string): Promise<void> {
  if (!pod?.spec.nodeName) throw new NotInjected(`no pod to kill ${container} in`);
  const status = statuses(pod).find((x) => x.name === container);
  const id = status?.containerID?.replace(/^\w+:\/\//, '');
  if (!id || !status?.state?.running || pod.metadata.deletionTimestamp)
    throw new NotInjected(`${pod.metadata.name}: its ${container} container is not running`);
  t.injectedRestarts.push(`${pod.metadata.name}/${container}`);
  const r = await t.c.node(pod.spec.nodeName).ctr(['task', 'kill', '--signal', 'SIGKILL', id]);
  if (r.code !== 0) t.note(`ctr task kill ${container} of ${pod.metadata.name}: ${r.stderr.trim()}`);
}

/** The API server's address and port as the nodes reach it (the Service's endpoint). */
function apiEndpoint(c: Cluster): { ip: string; port: string } {
  const u = new URL(c.server);
  return { ip: u.hostname, port: u.port || '443' };
}

const NFT_TABLE = 'robustness';

/** nft rules in the node's namespace dropping its traffic to and/or from the API server. */
export function renderPathDrop(ip: string, port: string, direction: 'to-api' | 'from-api' | 'both'): string {
  const to = direction !== 'from-api' ? [`    ip daddr ${ip} tcp dport ${port} drop`] : [];
  const from = direction !== 'to-api' ? [`    ip saddr ${ip} tcp sport ${port} drop`] : [];
  const chain = (name: string, hook: string, rules: string[]) => [
    `  chain ${name} {`,
    `    type filter hook ${hook} priority 0;`,
    ...rules,
    '  }',
  ];
  // Host-network processes (kubelet, speakers) pass output and input; pods' traffic is forwarded.
  return [
    `table inet ${NFT_TABLE} {`,
    ...chain('host_out', 'output', to),
    ...chain('host_in', 'input', from),
    ...chain('pods', 'forward', [...to, ...from]),
    '}',
    '',
  ].join('\n');
}

/** The `kubernetes` Service's ClusterIP and port: what pods (and host-network pods) dial. */
const KUBERNETES_SERVICE = { ip: '10.96.0.1', port: '443' };
const NFT_429_TABLE = 'robustness_429';

/**
 * nft NAT rules in a node's namespace sending new connections to the `kubernetes` Service to the
 * throttling proxy instead of the API server. Priority -101: before kube-proxy's DNAT (-100), and
 * a connection's first NAT decides (later NAT chains of the hook are skipped). Pods' traffic
 * passes prerouting; host-network pods' (the speakers') passes output.
 */
export function renderApiRedirect(proxyIp: string, proxyPort: number): string {
  const rule = `    ip daddr ${KUBERNETES_SERVICE.ip} tcp dport ${KUBERNETES_SERVICE.port} dnat to ${proxyIp}:${proxyPort}`;
  const chain = (name: string, hook: string) => [
    `  chain ${name} {`,
    `    type nat hook ${hook} priority -101;`,
    rule,
    '  }',
  ];
  return [
    `table ip ${NFT_429_TABLE} {`,
    ...chain('pods', 'prerouting'),
    ...chain('host', 'output'),
    '}',
    '',
  ].join('\n');
}

/** Whose requests the API-429 fault refuses: the sidecars' (their user agent, sidecar/main.ts). */
export const isSidecarRequest = (headers: Record<string, string | string[] | undefined>): boolean =>
  String(headers['user-agent'] ?? '').startsWith('drainguard-sidecar/');

/**
 * The API server answering 429 to the sidecars: a TLS proxy holding the API server's certificate
 * on the host's switch address, every node's connections to the `kubernetes` Service redirected to
 * it, and their open connections to the Service forgotten by conntrack (a client's next packet on
 * one is reset, so it dials again, through the proxy). Only the sidecars' requests are refused
 * (Retry-After: 1); the speaker simulator's pass, so what is tested is drainguard's behaviour.
 * The lift removes the redirect, forgets the proxied connections and closes the proxy.
 */
async function answer429(t: Target): Promise<Lift> {
  const c = t.c;
  const proxy = await apiProxy(c.cp, { host: apiEndpoint(c).ip });
  proxy.refuseWhere((req) => isSidecarRequest(req.headers), 1);
  // The open connections to the `kubernetes` Service dial again: the node's own (host-network
  // speakers and sidecars) are destroyed visibly (`ss -K`: each client sees its socket end at
  // once); then the NAT entries of every flow are forgotten (the pods', in their own namespaces,
  // reach the new target at their next packet). Forgetting a host-network client's entry alone
  // would leave a silent watch on a connection whose answers no longer reach it.
  const forget = async (n: LabNode) => {
    await n.netns.exec(['ss', '-K', 'dst', KUBERNETES_SERVICE.ip, 'dport', '=', KUBERNETES_SERVICE.port]);
    await n.netns.exec([
      'conntrack',
      '-D',
      '-p',
      'tcp',
      '--orig-dst',
      KUBERNETES_SERVICE.ip,
      '--orig-port-dst',
      KUBERNETES_SERVICE.port,
    ]);
  };
  for (const n of c.nodes) {
    await n.netns.run(['nft', '-f', '-'], { input: renderApiRedirect(proxy.host, proxy.port) });
    await forget(n);
  }
  let lifted = false;
  return async () => {
    if (lifted) return;
    lifted = true;
    proxy.stopRefusing();
    // New connections go to the API server again. The proxy closes the open ones while their
    // NAT entries still exist, so each client sees its connection end and dials again at once;
    // forgotten first, the proxy's FIN would no longer be translated back, and a client with a
    // silent watch (a speaker) would sit on a dead connection until its idle limit (SEED=77
    // TRIAL=25: a peer's Node watch dead for 7 s after the lift, the VIP answered twice).
    for (const n of c.nodes) await n.netns.exec(['nft', 'delete', 'table', 'ip', NFT_429_TABLE]);
    await proxy.close();
    for (const n of c.nodes) await forget(n);
    const refused = proxy.calls.filter((x) => x.status === 429);
    const passed = proxy.calls.length - refused.length;
    const paths = [...new Set(refused.map((x) => `${x.verb} ${x.url.split('?')[0]}`))].slice(0, 6);
    t.note(
      `api-429: ${refused.length} sidecar requests answered 429 (${paths.join(', ')}), ${passed} passed`,
    );
  };
}

/** The kubelet of a node: its pid and command line (the lab starts it through nsenter, which execs it). */
function kubeletOf(n: LabNode): { pid: number; argv: string[] } | undefined {
  const config = join(n.dir, 'kubelet.json');
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const argv = readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0').filter(Boolean);
      if (argv[0]?.endsWith('/kubelet') && argv.includes(config)) return { pid: Number(e), argv };
    } catch {}
  }
  return undefined;
}

/**
 * Stops the kubelet and starts it again with the same command line after `downMs`, in the node's
 * namespaces as the lab does (lab/cluster/node.ts). The cluster's teardown finds it by its
 * directory in its command line.
 */
async function restartKubelet(t: Target, downMs: number): Promise<Lift> {
  const n = t.c.node(t.node);
  const k = kubeletOf(n);
  if (!k) throw new Error(`${t.node}: kubelet not found`);
  await killAndWait(k.pid);
  let started = false;
  const start = async () => {
    if (started) return;
    started = true;
    const fd = openSync(join(n.dir, 'kubelet.log'), 'a');
    const child = spawn(
      'nsenter',
      [`--mount=${join(n.dir, 'mnt', 'ns')}`, `--net=/run/netns/${n.netns.ns}`, ...k.argv],
      { stdio: ['ignore', fd, fd], detached: true },
    );
    child.unref();
    t.note(`${t.node}: kubelet restarted (pid ${child.pid})`);
  };
  const timer = setTimeout(() => void start(), downMs);
  return async () => {
    clearTimeout(timer);
    await start();
  };
}

/**
 * The seed's own failure: the acting node's etcd member removed (through another member), so its
 * API server answers from its cache, keeps watches silent and holds consistent reads, while the
 * cluster moves on (docs/lab-cluster.md). The runner's own API access moves to another member
 * first. The lift adds the member back (a fresh etcd on the node) and waits until its API server
 * answers from etcd again.
 */
async function staleApiServer(t: Target): Promise<Lift> {
  const ha = t.c.ha;
  if (!ha) throw new Error('stale-api-server needs the HA control plane (CONTROL_PLANES=3)');
  const m = ha.members.find((x) => x.name === t.node);
  if (!m) throw new NotInjected(`${t.node} runs no API server`);
  const other = ha.members.find((x) => x !== m) as (typeof ha.members)[number];
  if (ha.admin === m) ha.useAdmin(other.name);
  const id = (await memberList(other.etcdClientURL)).find((x) => x.name === m.name)?.id;
  if (!id) throw new NotInjected(`${m.name}'s etcd member is not listed (removed already)`);
  await memberRemove(other.etcdClientURL, id);
  t.note(`${m.name}: etcd member ${id} removed; its API server is stale`);
  let back = false;
  return async () => {
    if (back) return;
    back = true;
    await ha.rejoin(m.name);
    t.note(`${m.name}: etcd member added back; its API server answers from etcd again`);
  };
}

/**
 * Waits until the kubelet reports `p`'s speaker restarted, or `p` replaced by another pod. The
 * report comes through the API: a path drop or API restart of this trial struck meanwhile (≤ 30 s
 * each) delays it, so the wait outlasts one (SEED=109 TRIAL=27: path dropped 2.2–26.7 s, a 30 s
 * wait ran out).
 */
async function restartReported(t: Target, p: PodView, how: string): Promise<'restarted' | 'replaced'> {
  const restarts = (q: PodView | undefined) =>
    (q ? statuses(q) : []).find((x) => x.name === 'speaker')?.restartCount ?? 0;
  const before = restarts(p);
  let replaced = false;
  await waitFor(
    `${p.metadata.name}: speaker ${how}`,
    async () => {
      const q = await t.speaker();
      replaced = q?.metadata.uid !== p.metadata.uid;
      return replaced || restarts(q) > before;
    },
    { timeoutMs: RESTART_REPORT_WAIT_MS, intervalMs: 250 },
  );
  return replaced ? 'replaced' : 'restarted';
}

/** Injects `f`; returns its lift. */
export async function inject(f: PlannedFault, t: Target): Promise<Lift> {
  const c = t.c;
  switch (f.kind) {
    case 'sidecar-sigkill':
      await killContainer(t, await t.pod(), SIDECAR_NAME);
      return nothing;
    case 'pod-delete': {
      const p = await t.pod();
      if (p) await c.kubectl(['delete', 'pod', '-n', p.metadata.namespace, p.metadata.name, '--wait=false']);
      return nothing;
    }
    case 'speaker-restart': {
      const p = await t.speaker();
      await killContainer(t, p, 'speaker');
      // Struck once the kubelet has reported the restart, as the liveness fault below: a settle
      // read before it would take drainguard's handover of the stop for a leftover (seed 112
      // trial 28: at rest 0.9 s after the kill, the label written just after).
      if (p) await restartReported(t, p, 'killed');
      return nothing;
    }
    case 'liveness-failure': {
      // The probe fails once: the restarted container starts without the file.
      const p = await t.speaker();
      if (!p) throw new NotInjected(`no speaker pod on ${t.node}`);
      const touch = () =>
        c.kubectl([
          'exec',
          '-n',
          p.metadata.namespace,
          p.metadata.name,
          '-c',
          'speaker',
          '--',
          'touch',
          LIVENESS_FAIL_FILE,
        ]);
      // The exec goes through the node's kubelet: just restarted (a kubelet-restart of this trial,
      // lifted), it may not serve yet (SEED=78 TRIAL=34: refused 3 s after its start). The touch
      // is idempotent: tried again until the kubelet answers, for up to 30 s.
      let r = { code: -1, stderr: '' };
      await waitFor(
        `${p.metadata.name}: the kubelet answers exec`,
        async () => {
          r = await touch();
          return r.code === 0 || !/error dialing backend/.test(r.stderr);
        },
        { timeoutMs: 30_000, intervalMs: 500 },
      );
      if (r.code !== 0 && execFoundNoContainer(r.stderr))
        throw new NotInjected(`${p.metadata.name}: its speaker container is not running`);
      if (r.code !== 0)
        throw new Error(`touch ${LIVENESS_FAIL_FILE} in ${p.metadata.name}: ${r.stderr.trim()}`);
      t.injectedRestarts.push(`${p.metadata.name}/speaker`);
      // Struck once the kubelet has restarted it: a settle checked before that would see the
      // restart's own handover as the scene not at rest (SEED=36 TRIAL=1 in CI).
      // Not when the pod itself went away meanwhile: the trial's own action may delete it, its
      // deletion not yet seen when the fault looked it up (SEED=111 TRIAL=62: struck 0.1 s after
      // the deletion, then 90 s waiting for a restart that could not come).
      if ((await restartReported(t, p, 'restarted by its liveness probe')) === 'replaced')
        throw new NotInjected(`${p.metadata.name} went away before its liveness restart`);
      return nothing;
    }
    case 'api-server-restart': {
      await c.cp.stopApiServer();
      let up = false;
      return async () => {
        if (up) return;
        up = true;
        await c.cp.startApiServer();
      };
    }
    case 'api-429':
      return answer429(t);
    case 'api-path-drop': {
      const { ip, port } = apiEndpoint(c);
      const ns = c.bed.node(t.node);
      await ns.run(['nft', '-f', '-'], { input: renderPathDrop(ip, port, f.direction ?? 'both') });
      return async () => {
        await ns.exec(['nft', 'delete', 'table', 'inet', NFT_TABLE]);
      };
    }
    case 'etcd-pause': {
      const pid = c.cp.etcdPid;
      process.kill(pid, 'SIGSTOP');
      return async () => {
        if (pidAlive(pid)) process.kill(pid, 'SIGCONT');
      };
    }
    case 'second-cordon':
      await c.kubectl(['cordon', t.other]);
      return async () => {
        await c.kubectl(['uncordon', t.other]);
      };
    case 'uncordon-recordon': {
      await c.kubectl(['uncordon', t.node]);
      await new Promise((r) => setTimeout(r, f.durationMs));
      await c.kubectl(['cordon', t.node]);
      return nothing;
    }
    case 'kubelet-restart':
      return restartKubelet(t, f.durationMs);
    case 'webhook-down': {
      await c.kubectl(['scale', '-n', 'drainguard-system', 'deployment/drainguard-webhook', '--replicas=0']);
      return async () => {
        await c.kubectl([
          'scale',
          '-n',
          'drainguard-system',
          'deployment/drainguard-webhook',
          '--replicas=2',
        ]);
      };
    }
    case 'stale-api-server':
      return staleApiServer(t);
    default:
      throw new Error(`fault ${f.kind} is not implemented by this runner`);
  }
}
