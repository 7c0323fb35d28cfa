// A MetalLB layer-2 speaker simulator, one process per test node, run inside the node's
// network namespace:  node lab/sim/speaker/speaker.ts '<json SpeakerSimConfig>'
// or in a hostNetwork pod of the lab image on the lab cluster: no kubeconfig (the pod's service
// account, in-cluster), the node from $NODE_NAME (downward API), as MetalLB's own DaemonSet does.
// - memberlist-like liveness: UDP heartbeats on 7946 to every peer; a peer missing for deadMs is
//   dead, an explicit leave (sent on SIGTERM) removes it at once;
// - election as MetalLB does it (election.ts), from this process' own view of the API;
// - ServiceL2Status with v0.16 semantics: the owner writes its own object and deletes other
//   nodes' objects for the service; a node that stops announcing deletes its own;
// - the wire (ARP replies, gratuitous ARP on takeover) through wire.py on an AF_PACKET socket;
// - stdin "freeze" / "unfreeze": stop seeing API updates (a stale local apiserver), keep
//   announcing what it last decided, write nothing.
// stdout: JSON lines, {"ev":"ready"} once synced, {"ev":"announce","vips":[...]} on change.
import { type ChildProcess, spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { createInterface } from 'node:readline';
import { systemClock } from '../../../shared/clock.ts';
import { KubeClient } from '../../../shared/kube/client.ts';
import { Informer } from '../../../shared/kube/informer.ts';
import { kubeconfigAuth } from '../../../shared/kube/kubeconfig.ts';
import type { KubeObject, Node } from '../../../shared/kube/types.ts';
import { createLogger } from '../../../shared/log.ts';
import { eligible, liveMembers, type MemberView, owner } from './election.ts';

export interface SpeakerSimConfig {
  node: string;
  iface: string;
  /** Absent: in-cluster credentials. */
  kubeconfig?: string;
  namespace: string;
  peers: { node: string; ip: string }[];
  port?: number;
  heartbeatMs?: number;
  deadMs?: number;
  /** MetalLB < 0.14.4: no ServiceL2Status CRD, nothing written. */
  noCrd?: boolean;
  /** The L2Advertisement's `interfaces` (reported in ServiceL2Status); default none, as MetalLB's default. */
  l2AdvertisementInterfaces?: string[];
  /** MetalLB 0.14.4–0.14.5 without --enable-l2-service-status: the CRD exists, nothing is written. */
  noStatusWrites?: boolean;
}

interface Service extends KubeObject {
  spec?: { type?: string };
  status?: { loadBalancer?: { ingress?: { ip?: string }[] } };
}
interface L2Status extends KubeObject {
  status?: { node?: string; serviceName?: string; serviceNamespace?: string };
}

const parsed = JSON.parse(process.argv[2] ?? '{}') as Partial<SpeakerSimConfig>;
const cfg = { ...parsed, node: parsed.node || process.env.NODE_NAME || '' } as SpeakerSimConfig;
if (!cfg.node) throw new Error('speaker-sim: no node name (config "node" or $NODE_NAME)');
const port = cfg.port ?? 7946;
const heartbeatMs = cfg.heartbeatMs ?? 200;
const deadMs = cfg.deadMs ?? 5000;
const log = createLogger(`speaker-sim-${cfg.node}`, process.env.SIM_LOG_LEVEL ?? 'warn');
const emit = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);

const client = new KubeClient(kubeconfigAuth({ kubeconfig: cfg.kubeconfig }), {
  userAgent: `speaker-sim/${cfg.node}`,
});
let frozen = false;
const view: MemberView = { lastSeen: new Map(), left: new Set() };
// The API view the election uses; frozen = not updated any more.
const nodes = new Map<string, Node>();
const services = new Map<string, Service>();
const statuses = new Map<string, L2Status>();

// --- wire ---------------------------------------------------------------------------------
const wire: ChildProcess = spawn(
  'python3',
  [new URL('./wire.py', import.meta.url).pathname, 'speaker', cfg.iface],
  {
    stdio: ['pipe', 'inherit', 'inherit'],
  },
);
const toWire = (line: string) => wire.stdin?.write(`${line}\n`);
wire.on('exit', (code) => {
  if (!stopping) {
    log.error({ code }, 'wire helper exited');
    process.exit(1);
  }
});

// --- memberlist ---------------------------------------------------------------------------
const sock = dgram.createSocket({ type: 'udp4', reuseAddr: true });
// A memberlist cut (nft output drop) fails sends with EPERM: like a real speaker, carry on.
sock.on('error', (e) => log.debug({ err: e.message }, 'memberlist send failed'));
sock.on('message', (msg) => {
  try {
    const m = JSON.parse(msg.toString()) as { node: string; type: 'alive' | 'leave' };
    if (m.node === cfg.node) return;
    if (m.type === 'leave') {
      view.left.add(m.node);
      view.lastSeen.delete(m.node);
    } else {
      view.left.delete(m.node);
      view.lastSeen.set(m.node, Date.now());
    }
    schedule();
  } catch {
    // not ours
  }
});
await new Promise<void>((resolve) => sock.bind(port, '0.0.0.0', () => resolve()));
const beat = (type: 'alive' | 'leave') => {
  const msg = Buffer.from(JSON.stringify({ node: cfg.node, type }));
  for (const p of cfg.peers) if (p.node !== cfg.node) sock.send(msg, port, p.ip, () => {});
};
const beatTimer = setInterval(() => beat('alive'), heartbeatMs);

// --- API view -----------------------------------------------------------------------------
const copyInto = (objs: ReadonlyMap<string, KubeObject>, into: Map<string, KubeObject>) => {
  into.clear();
  for (const [k, o] of objs) into.set(k, o);
};
const views: [Informer, Map<string, KubeObject>][] = [];
const informer = (path: string, into: Map<string, KubeObject>) => {
  const inf = new Informer(client, {
    path,
    log,
    clock: systemClock,
    onChange: (objs) => {
      if (frozen) return;
      copyInto(objs, into);
      schedule();
    },
  });
  views.push([inf, into]);
  inf.start();
  return inf;
};
const informers = [
  informer('/api/v1/nodes', nodes as Map<string, KubeObject>),
  informer('/api/v1/services', services as Map<string, KubeObject>),
  ...(cfg.noCrd
    ? []
    : [informer(`/apis/metallb.io/v1beta1/namespaces/${cfg.namespace}/servicel2statuses`, statuses)]),
];

// --- election and announcing --------------------------------------------------------------
let announced = new Set<string>();
let running: Promise<void> | undefined;
let dirty = false;
let stopping = false;

function schedule(): void {
  dirty = true;
  running ??= (async () => {
    while (dirty && !stopping) {
      dirty = false;
      await reconcile().catch((e: unknown) => log.warn({ err: (e as Error).message }, 'reconcile failed'));
    }
    running = undefined;
  })();
}

const lbIP = (s: Service) => s.status?.loadBalancer?.ingress?.find((i) => i.ip)?.ip;
const statusName = (svc: string, node: string) => `${svc}-${node}`.toLowerCase().slice(0, 253);

const startedAt = Date.now();
// Like memberlist joining: hear the peers before deciding anything, or every speaker would
// briefly think it is alone and announce everything.
const joinMs = Math.max(3 * heartbeatMs, 600);

async function reconcile(): Promise<void> {
  if (Date.now() - startedAt < joinMs) return;
  const live = liveMembers(cfg.node, view, Date.now(), deadMs);
  const candidates = eligible(nodes.values(), live);
  const mine = new Map<string, Service>();
  for (const s of services.values()) {
    const ip = lbIP(s);
    if (s.spec?.type !== 'LoadBalancer' || !ip) continue;
    if (owner(candidates, ip) === cfg.node) mine.set(ip, s);
  }
  const next = new Set(mine.keys());
  const added = [...next].filter((v) => !announced.has(v));
  if (added.length > 0 || [...announced].some((v) => !next.has(v))) {
    announced = next;
    toWire(`vips ${[...next].join(' ')}`);
    if (added.length > 0) toWire(`garp ${added.join(' ')}`);
    emit({ ev: 'announce', node: cfg.node, vips: [...next].sort(), t: Date.now() });
  }
  if (frozen || cfg.noCrd || cfg.noStatusWrites) return;
  await syncStatuses(mine);
}

async function syncStatuses(mine: Map<string, Service>): Promise<void> {
  const base = `/apis/metallb.io/v1beta1/namespaces/${cfg.namespace}/servicel2statuses`;
  const mineKeys = new Set([...mine.values()].map((s) => `${s.metadata?.namespace}/${s.metadata?.name}`));
  for (const s of mine.values()) {
    const ns = s.metadata?.namespace ?? '';
    const name = s.metadata?.name ?? '';
    const objName = statusName(name, cfg.node);
    const existing = statuses.get(`${cfg.namespace}/${objName}`);
    if (!existing?.status?.node) {
      const body = {
        apiVersion: 'metallb.io/v1beta1',
        kind: 'ServiceL2Status',
        metadata: {
          name: objName,
          namespace: cfg.namespace,
          labels: {
            'metallb.io/node': cfg.node,
            'metallb.io/service-name': name,
            'metallb.io/service-namespace': ns,
          },
        },
        spec: {},
      };
      let obj: L2Status;
      try {
        obj = await client.create<L2Status>(base, body, { retries: 3 });
      } catch (e) {
        obj = await client.get<L2Status>(`${base}/${objName}`);
        if (!obj) throw e;
      }
      await client.replace(
        `${base}/${objName}/status`,
        {
          ...obj,
          status: {
            node: cfg.node,
            serviceName: name,
            serviceNamespace: ns,
            // MetalLB lists interfaces only when the L2Advertisement names them; its default names none.
            interfaces: (cfg.l2AdvertisementInterfaces ?? []).map((name) => ({ name })),
          },
        },
        { retries: 3 },
      );
    }
    // v0.16: other nodes' objects for a service this node now announces are removed.
    for (const o of statuses.values())
      if (o.status?.serviceName === name && o.status.serviceNamespace === ns && o.status.node !== cfg.node)
        await client.delete(`${base}/${o.metadata?.name}`).catch(() => undefined);
  }
  for (const o of statuses.values()) {
    const key = `${o.status?.serviceNamespace}/${o.status?.serviceName}`;
    if (o.status?.node === cfg.node && !mineKeys.has(key))
      await client.delete(`${base}/${o.metadata?.name}`).catch(() => undefined);
  }
}

// Liveness changes with time, not only with events.
const tick = setInterval(schedule, 100);

createInterface({ input: process.stdin }).on('line', (line) => {
  const cmd = line.trim();
  if (cmd === 'freeze') frozen = true;
  if (cmd === 'unfreeze') {
    frozen = false;
    // Catch up at once, like a local apiserver that syncs again.
    for (const [inf, into] of views) copyInto(inf.objects, into);
  }
  emit({ ev: cmd, node: cfg.node });
  schedule();
});

async function shutdown(): Promise<void> {
  // Like the real speaker: answers ARP until it exits, then leaves memberlist; no goodbye ARP.
  emit({ ev: 'sigterm', node: cfg.node, t: Date.now() });
  stopping = true;
  beat('leave');
  clearInterval(beatTimer);
  clearInterval(tick);
  await running;
  toWire('quit');
  await Promise.all(informers.map((i) => i.stop()));
  sock.close();
  client.close();
  process.exit(0);
}
process.once('SIGTERM', () => void shutdown());
process.once('SIGINT', () => void shutdown());

const started = Date.now();
const readyTimer = setInterval(() => {
  if (informers.every((i) => i.hasSynced) && Date.now() - startedAt >= joinMs) {
    clearInterval(readyTimer);
    emit({ ev: 'ready', node: cfg.node, ms: Date.now() - started });
  }
}, 20);
