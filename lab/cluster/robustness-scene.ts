// The robustness suite's scene on the lab cluster (I/O): MetalLB's speakers announcing one VIP
// and a skupper site electing through a Lease, both with drainguard injected, and a client
// namespace on the switch for ARP probes. Reads of the scene's state for the trials: who answers,
// who holds the Lease, the pods and their containers, and what drainguard left on the nodes.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from '../../shared/clock.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import type { Lease } from '../../shared/kube/types.ts';
import { L2_STATE_ANNOTATION, SIDECAR_NAME } from '../../shared/names.ts';
import { apiFenceTableIn, fenceTablesIn } from '../../shared/net/fence-tables.ts';
import { GUARDED_REJOIN_MS } from '../../sidecar/drain/guarded.ts';
import { macsIn, probeRounds } from '../bed/arp-probe.ts';
import type { Cluster } from './cluster.ts';
import { installDrainguard, installMetalLbBase } from './install.ts';
import { leftoversOf } from './leftovers.ts';
import { installMetalLbL2 } from './metallb.ts';
import { runningStatuses } from './pods.ts';
import { installSkupperSite, SKUPPER_LEASE } from './skupper.ts';

export const SPEAKER_NS = 'metallb-system';
export const SITE_NS = 'site';
/** drainguard's netfilter-cleanup DaemonSet (as its overlay installs it) and the live pods it must spare (netfilter.ts). */
export const CLEANUP_NS = 'drainguard-netfilter';
export const LIVE_NS = 'nf-live';
export const LEASE = `${SITE_NS}/${SKUPPER_LEASE}`;
/** client-go's RenewDeadline as skupper sets it (lab/sim/lease-candidate.ts). */
export const RENEW_DEADLINE_MS = 10_000;

export interface PodView {
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    labels?: Record<string, string>;
    deletionTimestamp?: string;
  };
  spec: { nodeName?: string; initContainers?: { name: string; restartPolicy?: string }[] };
  status?: {
    phase?: string;
    podIP?: string;
    /** The main containers'; a native sidecar's is in initContainerStatuses: read both with statuses(). */
    containerStatuses?: ContainerStatusView[];
    initContainerStatuses?: ContainerStatusView[];
  };
}

export interface ContainerStatusView {
  name: string;
  ready: boolean;
  restartCount: number;
  containerID?: string;
  state?: { running?: { startedAt?: string } };
  lastState?: { terminated?: { reason?: string; exitCode?: number } };
}

/** Every container of the pod that runs for its life, a native sidecar included. */
export const statuses = (p: PodView): ContainerStatusView[] => runningStatuses(p);
interface NodeView {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: { unschedulable?: boolean };
}

export interface Scene {
  c: Cluster;
  vip: string;
  nodes: string[];
  client: KubeClient;
  nodeOfMac(mac: string): string;
}

/** The file whose presence fails the speaker's liveness probe (the liveness-failure fault). */
export const LIVENESS_FAIL_FILE = '/tmp/fail-liveness';

/**
 * Drainguard, MetalLB's speakers with the VIP, and the skupper site, installed and rolled out.
 * `liveness`: the speaker (the guarded container) gets a liveness probe the nemesis can fail —
 * only when a trial needs it, since adding it rolls every speaker once more.
 */
export async function setUpScene(c: Cluster, opts: { liveness?: boolean } = {}): Promise<Scene> {
  const vip = c.bed.addr4(100);
  await installMetalLbBase(c);
  await installDrainguard(c);
  await installMetalLbL2(c, vip, { inject: true });
  if (opts.liveness) {
    const probe = {
      exec: { command: ['sh', '-c', `test ! -e ${LIVENESS_FAIL_FILE}`] },
      periodSeconds: 1,
      failureThreshold: 1,
    };
    await c.k([
      'patch',
      'daemonset',
      '-n',
      SPEAKER_NS,
      'speaker',
      '--type=json',
      '-p',
      JSON.stringify([{ op: 'add', path: '/spec/template/spec/containers/0/livenessProbe', value: probe }]),
    ]);
    await c.k(['rollout', 'status', '-n', SPEAKER_NS, 'daemonset/speaker', '--timeout=300s']);
  }
  await installSkupperSite(c, SITE_NS, { inject: true });
  const byMac = new Map(c.nodes.map((n) => [c.bed.node(n.name).mac.toLowerCase(), n.name]));
  // On the HA control plane the runner's admin access moves off a member made stale
  // (nemesis.ts, stale-api-server): the scene's client follows it.
  let client = c.client();
  let server = c.ha?.admin.server;
  return {
    c,
    vip,
    nodes: c.nodes.map((n) => n.name),
    get client() {
      if (c.ha && c.ha.admin.server !== server) {
        client.close();
        client = c.client();
        server = c.ha.admin.server;
      }
      return client;
    },
    nodeOfMac: (mac) => byMac.get(mac.toLowerCase()) ?? mac,
  };
}

const short = { timeoutMs: 2_000 };

export async function podsIn(s: Scene, ns: string): Promise<PodView[]> {
  return (await s.client.get<{ items: PodView[] }>(`/api/v1/namespaces/${ns}/pods`, short)).items;
}
export async function nodeViews(s: Scene): Promise<NodeView[]> {
  return (await s.client.get<{ items: NodeView[] }>('/api/v1/nodes', short)).items;
}
export async function leaseHolder(s: Scene): Promise<string> {
  const l = await s.client.get<Lease>(
    `/apis/coordination.k8s.io/v1/namespaces/${SITE_NS}/leases/${SKUPPER_LEASE}`,
    short,
  );
  return l.spec?.holderIdentity ?? '';
}

const isRouter = (p: PodView) => p.metadata.labels?.['skupper.io/component'] === 'router';
const allReady = (p: PodView, containers: number) =>
  !p.metadata.deletionTimestamp && statuses(p).length === containers && statuses(p).every((x) => x.ready);

/** The VIP's answers over a few rounds, as node names. */
export async function answering(s: Scene, rounds = 6): Promise<string[]> {
  return macsIn(await probeRounds(s.c.bed.node('client'), s.vip, rounds, 50)).map(s.nodeOfMac);
}

/** Nodes whose speaker could announce (its container Ready), from the speaker pods. */
export function eligibleNodes(speakers: PodView[]): string[] {
  return speakers
    .filter((p) => !p.metadata.deletionTimestamp && statuses(p).find((x) => x.name === 'speaker')?.ready)
    .map((p) => p.spec.nodeName as string)
    .sort();
}

/** How long after a speaker's restart drainguard may still be handing its node back (and 2 s to write it). */
export const JUST_RESTARTED_MS = GUARDED_REJOIN_MS + 2_000;

/**
 * Nodes whose speaker container was restarted (restartCount > 0) less than JUST_RESTARTED_MS ago.
 * drainguard hands a stopped speaker's VIPs over and takes the node back only once the new one has
 * served 10 s: until then its label and fence are on purpose, not left behind (seed 112 trial 28:
 * the scene read at rest 0.9 s after a kill, before the label, then the label read as a leftover).
 */
export function speakersJustRestarted(speakers: readonly PodView[], now: number): string[] {
  return speakers
    .filter((p) => {
      const st = statuses(p).find((x) => x.name === 'speaker');
      const started = Date.parse(st?.state?.running?.startedAt ?? '');
      return (st?.restartCount ?? 0) > 0 && Number.isFinite(started) && now - started < JUST_RESTARTED_MS;
    })
    .map((p) => p.spec.nodeName ?? p.metadata.name)
    .sort();
}

/** Nodes whose L2 state reports the fence on (and not being lifted). */
export function fencedNodes(nodes: NodeView[]): string[] {
  return nodes
    .filter((n) => {
      try {
        const st = JSON.parse(n.metadata.annotations?.[L2_STATE_ANNOTATION] ?? '{}') as {
          fenced?: boolean;
          phase?: string;
        };
        // Undoing: the fence is being lifted on purpose (the node is back), a handback follows.
        return st.fenced === true && st.phase !== 'undoing';
      } catch {
        return false;
      }
    })
    .map((n) => n.metadata.name);
}

export interface Ready {
  /** The node answering for the VIP. */
  owner: string;
  /** The Lease holder's pod and its node. */
  leader: PodView;
}

/**
 * The scene at rest: every node schedulable, three speakers and two routers Ready with their
 * sidecars, one node alone answering for the VIP, a Lease holder among the routers, and nothing
 * of drainguard's left on a node. Waits up to timeoutMs; throws with what was missing.
 */
export async function sceneReady(s: Scene, timeoutMs: number): Promise<Ready> {
  let last = 'not read yet' as Ready | string;
  await waitFor(
    'the scene at rest',
    async () => {
      last = await restState(s).catch((e) => `API: ${(e as Error).message}`);
      return typeof last !== 'string';
    },
    { timeoutMs, intervalMs: 500 },
  ).catch((e) => {
    throw new Error(`${(e as Error).message}: ${last as string}`);
  });
  return last as Ready;
}

/** The scene at rest (Ready), or what is still missing. */
async function restState(s: Scene): Promise<Ready | string> {
  const nodes = await nodeViews(s);
  const cordoned = nodes.filter((n) => n.spec?.unschedulable).map((n) => n.metadata.name);
  if (cordoned.length) return `cordoned: ${cordoned.join(', ')}`;
  const speakers = await podsIn(s, SPEAKER_NS);
  if (speakers.filter((p) => allReady(p, 2)).length !== s.nodes.length) return 'speakers not all Ready';
  const young = speakersJustRestarted(speakers, Date.now());
  if (young.length)
    return `speaker restarted less than ${JUST_RESTARTED_MS / 1000} s ago on ${young.join(', ')}`;
  const routers = (await podsIn(s, SITE_NS)).filter(isRouter);
  const ready = routers.filter((p) => allReady(p, 3));
  if (ready.length !== 2 || routers.length !== 2) return `${ready.length}/${routers.length} routers Ready`;
  const left = (await leftovers(s)).filter((l) => l.what.length);
  if (left.length) return `left: ${left.map((l) => `${l.node}: ${l.what.join(', ')}`).join('; ')}`;
  const holder = await leaseHolder(s);
  const leader = ready.find((p) => p.metadata.name === holder);
  if (!leader) return `Lease holder "${holder}" is not a Ready router`;
  const answers = await answering(s);
  if (answers.length !== 1) return `VIP answered by [${answers.join(', ')}]`;
  // Last: it reads the speakers' whole logs from disk.
  const catchingUp = speakersCatchingUp(s, speakers);
  if (catchingUp.length) return `speakers' API views not current yet on ${catchingUp.join(', ')}`;
  return { owner: answers[0] as string, leader };
}

/**
 * The nodes whose speaker has not said its API views are all current (the simulator's last
 * `{"ev":"views"}` line in its container log, read from the node: no API needed). After an API
 * fault a speaker's informers back off before they list or watch again, up to 10 s; a trial
 * started meanwhile meets the previous trial's outage in a peer that does not see the label yet
 * (seed 79 trial 21: a drain 20 s after an API restart, dark 1.03 s).
 */
export function speakersCatchingUp(s: Scene, speakers: PodView[]): string[] {
  return speakers.flatMap((p) => {
    const node = s.c.nodes.find((n) => n.name === p.spec.nodeName);
    const status = statuses(p).find((x) => x.name === 'speaker');
    if (!node || !status) return [p.spec.nodeName ?? p.metadata.name];
    const dir = join(
      node.dir,
      'pod-logs',
      `${p.metadata.namespace}_${p.metadata.name}_${p.metadata.uid}`,
      'speaker',
    );
    // The current container's log, after the kubelet's rotated copies of it (not the gzipped ones).
    const current = `${status.restartCount}.log`;
    const files = safeList(dir)
      .filter((f) => f.startsWith(`${current}.`) && !f.endsWith('.gz'))
      .sort()
      .concat(current);
    let last: string | undefined;
    for (const f of files) {
      let text = '';
      try {
        text = readFileSync(join(dir, f), 'utf8');
      } catch {}
      const m = [...text.matchAll(/"ev":"views","node":"[^"]*","current":(true|false)/g)].at(-1);
      if (m) last = m[1];
    }
    return last === 'true' ? [] : [node.name];
  });
}

/** What drainguard left on each node: API objects and the fence tables in its namespace. */
export async function leftovers(s: Scene): Promise<{ node: string; what: string[] }[]> {
  const nodes = await nodeViews(s);
  return Promise.all(
    nodes.map(async (n) => {
      const r = await s.c.bed.node(n.metadata.name).exec(['nft', '-j', 'list', 'tables']);
      const tables =
        r.code === 0 ? [...fenceTablesIn(r.stdout), ...(apiFenceTableIn(r.stdout) ? ['api'] : [])] : [];
      return {
        node: n.metadata.name,
        what: leftoversOf({
          name: n.metadata.name,
          labels: n.metadata.labels ?? {},
          annotations: n.metadata.annotations ?? {},
          fenceTables: tables,
        }),
      };
    }),
  );
}

/** Every container of the scene's pods, keyed "pod/container", with its restarts. */
export async function containers(
  s: Scene,
): Promise<
  Map<string, { restarts: number; sidecar: boolean; lastExit?: { reason: string; exitCode: number } }>
> {
  const out = new Map<
    string,
    { restarts: number; sidecar: boolean; lastExit?: { reason: string; exitCode: number } }
  >();
  for (const ns of [SPEAKER_NS, SITE_NS, CLEANUP_NS, LIVE_NS])
    for (const p of await podsIn(s, ns))
      for (const x of statuses(p)) {
        const t = x.lastState?.terminated;
        out.set(`${p.metadata.name}/${x.name}`, {
          restarts: x.restartCount,
          sidecar: x.name === SIDECAR_NAME,
          ...(t ? { lastExit: { reason: t.reason ?? '', exitCode: t.exitCode ?? -1 } } : {}),
        });
      }
  return out;
}

/**
 * A container restarted this often in earlier trials gets a fresh pod before the next trial: the
 * kubelet's crash backoff (10 s doubling to 5 min, reset only after 10 min of running) would
 * otherwise hold its next restart past the settle's wait (here two more crashes in one trial wait
 * 20 + 40 s at most) (SEED=110 TRIAL=88: a speaker at 7
 * restarts, killed in the trial, not back within 120 s — drainguard rightly kept its node handed
 * over, and the runner checked for leftovers in a scene not at rest).
 */
export const RENEW_AFTER_RESTARTS = 2;

/** The speaker and router pods with a container restarted RENEW_AFTER_RESTARTS times or more. */
export function wornPods(pods: readonly PodView[]): PodView[] {
  return pods.filter(
    (p) => !p.metadata.deletionTimestamp && statuses(p).some((x) => x.restartCount >= RENEW_AFTER_RESTARTS),
  );
}

/**
 * Deletes the worn speaker and router pods (their DaemonSet and Deployment make fresh ones) and
 * waits until they are gone: between trials, before the scene is awaited at rest. Their names.
 */
export async function renewWornPods(s: Scene): Promise<string[]> {
  const worn = [
    ...wornPods(await podsIn(s, SPEAKER_NS)),
    ...wornPods((await podsIn(s, SITE_NS)).filter(isRouter)),
  ];
  for (const p of worn) {
    const r = await s.c.kubectl([
      'delete',
      'pod',
      '-n',
      p.metadata.namespace,
      p.metadata.name,
      '--wait=false',
    ]);
    if (r.code !== 0) throw new Error(`delete pod ${p.metadata.name}: ${r.stderr.trim()}`);
  }
  const names = new Set(worn.map((p) => p.metadata.name));
  await waitFor(
    'the worn pods gone',
    async () =>
      [...(await podsIn(s, SPEAKER_NS)), ...(await podsIn(s, SITE_NS))].every(
        (p) => !names.has(p.metadata.name),
      ),
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  return [...names];
}

/** The service account tokens of the scene's pods (speaker, skupper-router, netfilter cleanup). */
export async function tokens(s: Scene): Promise<string[]> {
  const out: string[] = [];
  for (const ns of [SPEAKER_NS, SITE_NS, CLEANUP_NS]) {
    const list = await s.client.get<{ items: { type?: string; data?: { token?: string } }[] }>(
      `/api/v1/namespaces/${ns}/secrets`,
      short,
    );
    for (const sec of list.items)
      if (sec.type === 'kubernetes.io/service-account-token' && sec.data?.token)
        out.push(Buffer.from(sec.data.token, 'base64').toString('utf8'));
  }
  return out;
}

/** Every container log line the kubelets keep on disk (pod-logs of each node), with its file. */
export function containerLogLines(c: Cluster): { source: string; line: string }[] {
  const out: { source: string; line: string }[] = [];
  for (const n of c.nodes) {
    const root = join(n.dir, 'pod-logs');
    let pods: string[] = [];
    try {
      pods = readdirSync(root);
    } catch {
      continue;
    }
    for (const pod of pods)
      for (const container of safeList(join(root, pod)))
        for (const f of safeList(join(root, pod, container))) {
          let text = '';
          try {
            text = readFileSync(join(root, pod, container, f), 'utf8');
          } catch {}
          for (const line of text.split('\n'))
            if (line) out.push({ source: `${n.name}/${pod}/${container}/${f}`, line });
        }
  }
  return out;
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

export const routersOf = (pods: PodView[]) => pods.filter(isRouter);
