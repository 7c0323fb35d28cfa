// A MetalLB layer-2 speaker simulator, one process per test node, run inside the node's
// network namespace:  node lab/sim/speaker/speaker.ts '<json SpeakerSimConfig>'
// or in a hostNetwork pod of the lab image on the lab cluster: no kubeconfig (the pod's service
// account, in-cluster), the node from $NODE_NAME (downward API), as MetalLB's own DaemonSet does.
//
// Modelled (metallb/metallb v0.14–v0.16; the rules themselves are in election.ts, pure and
// unit-tested in test/unit/sim/speaker-*.test.ts):
// - memberlist liveness by SWIM probe/ack on UDP 7946: every probe interval a ping to each peer,
//   an ack back to the sender of each ping received, a peer alive while an ack to one of our own
//   pings came within deadMs; `leave` sent on SIGTERM removes a member at once. So a node whose
//   output on 7946 is dropped (drainguard's fail-safe cut) sees ALL its peers die and they see it
//   die. Indirect probes (ping-req) and gossip of suspicion are not modelled; election.ts says
//   why that changes nothing for a node cut off in its own output;
// - the election per service as `ShouldAnnounce` does it, from this process' own API view:
//   type LoadBalancer, the pool holding its IPs (IPAddressPool `spec.addresses`, CIDRs and
//   ranges), the L2Advertisements of that pool (by name, pool selector, or all; service
//   selectors as v0.16) and their node selectors, a serving endpoint in its EndpointSlices
//   (none: nobody announces), for `externalTrafficPolicy: Local` only nodes with one, minus
//   excluded (label, any value) and NetworkUnavailable nodes, ordered by sha256(node#firstIP);
//   several services and VIPs at once, each owned by whichever node wins it;
// - EndpointSlices read from discovery.k8s.io/v1, or v1beta1 where v1 is not served (the lab's
//   Kubernetes 1.20), whose endpoint node is the `kubernetes.io/hostname` topology key;
//   IPAddressPools and L2Advertisements (metallb.io/v1beta1) from the MetalLB namespace;
// - ServiceL2Status with v0.16 semantics by default: the owner writes its own object and deletes
//   other nodes' objects for the service; a node that stops announcing deletes its own; with
//   `statusVersion` '0.15' (per scene) other nodes' objects linger (see below);
// - the wire through wire.py, one per interface in `ifaces` (MetalLB's responders, per
//   interface): ARP replies for every IPv4 VIP it owns (AF_PACKET) and solicited NAs for every
//   IPv6 VIP it owns (a raw ICMPv6 socket joined to each VIP's solicited-node group, as MetalLB's
//   NDP responder, multicast loopback left on as MetalLB leaves it: its own unsolicited NAs come
//   back to its node's input), and on takeover gratuitous ARP / unsolicited NAs: once, then every
//   1.1 s for 5 s;
// - L2Advertisement `interfaces` (`ipAdvertisementFor`): a VIP is answered on the interfaces its
//   advertisements selecting this node list, on every one when one lists none; ServiceL2Status
//   `status.interfaces` names them (none for every interface) and is rewritten when they change; a
//   VIP whose advertisements list only interfaces this node lacks is not announced (SetBalancer's
//   MatchInterfaces: MetalLB logs it and writes no status);
// - `ignoreExcludeLb`: MetalLB's --ignore-exclude-lb (Helm speaker.ignoreExcludeLB, v0.14.4+): the
//   exclude-from-external-load-balancers label no longer removes a node from the election;
// - stdin "node-lag <ms>": Node changes applied that much later (a lagging informer);
// - stdin "freeze" / "unfreeze": stop seeing API updates (a stale local apiserver), keep
//   announcing what it last decided, re-elect from the stale view, write nothing.
// - ServiceL2Status per MetalLB version (`statusVersion`, see SpeakerSimConfig): 0.14.4–0.14.5
//   with the flag on, 0.14.6–0.15.x (reuse of other nodes' objects, others left in place), 0.16
//   (the default); `noStatusWrites` for 0.14.4–0.14.5 defaults, `noCrd` for < 0.14.4.
// - gratuitous ARP re-armed when an API change makes it reprocess VIPs it already owns; any
//   request for an owned VIP answered, gratuitous ones (sender = target) included.
// Not modelled (the reason with each): metadata and status written on separate reconciles (here
// back to back: drainguard reads only objects with a status, so the split changes no decision);
// memberlist's suspicion timeout growing with the cluster size (deadMs 5 s is its 3-node timing,
// ~5–7 s; every test scene has 3 nodes); an NS's hop limit (mdlayher/ndp checks it is 255; the
// probes send 255); MetalLB refusing an invalid configuration as a whole (here an invalid pool
// range or selector just matches nothing); the allow-shared-ip checks; memberlist-disabled mode
// (none of these is configured in any test scene); responders on every UP BROADCAST interface
// (here the interfaces configured in `ifaces`: a node's CNI veths would each get one).
// stdout: JSON lines, {"ev":"ready"} once synced, {"ev":"announce","vips":[...]} on change,
// {"ev":"views","current":…} when its API views become current or stop being so.
import dgram from 'node:dgram';
import { createInterface } from 'node:readline';
import { systemClock } from '../../../shared/clock.ts';
import { KubeClient } from '../../../shared/kube/client.ts';
import { Informer } from '../../../shared/kube/informer.ts';
import { kubeconfigAuth } from '../../../shared/kube/kubeconfig.ts';
import type { KubeObject, Node } from '../../../shared/kube/types.ts';
import { createLogger } from '../../../shared/log.ts';
import {
  type EndpointSlice,
  type IPAddressPool,
  type L2Advertisement,
  liveMembers,
  type MemberMsg,
  newMemberView,
  probeRound,
  receive,
  type Service,
  shouldAnnounce,
} from './election.ts';
import { endpointSliceVersion } from './objects.ts';
import { Wires } from './wires.ts';

export interface SpeakerSimConfig {
  node: string;
  iface: string;
  /** Every interface it answers on (MetalLB: each UP BROADCAST one); default [iface]. */
  ifaces?: string[];
  /** Absent: in-cluster credentials. */
  kubeconfig?: string;
  namespace: string;
  peers: { node: string; ip: string }[];
  port?: number;
  /** memberlist probe interval: a ping to every peer this often (default 200 ms). */
  probeIntervalMs?: number;
  /** Former name of probeIntervalMs. */
  heartbeatMs?: number;
  /** A peer without an ack to our pings for this long is dead (default 5000 ms). */
  deadMs?: number;
  /** MetalLB < 0.14.4: no ServiceL2Status CRD, nothing written. */
  noCrd?: boolean;
  /** MetalLB 0.14.4–0.14.5 without --enable-l2-service-status: the CRD exists, nothing is written. */
  noStatusWrites?: boolean;
  /**
   * ServiceL2Status lifecycle of a MetalLB version (speaker/layer2_status_controller.go):
   * '0.14.4': 0.14.4–0.14.5 with --enable-l2-service-status: `<svc>-<node>` objects, status with
   *   `node` and `interfaces` only (no serviceName), other nodes' objects left alone;
   * '0.15': 0.14.6–0.15.x: `generateName: l2-`, the three labels, full status; a node that starts
   *   announcing reuses (relabels and rewrites) an object another node left for the service, else
   *   creates one; other nodes' objects are left in place;
   * '0.16' (default): as 0.15, but the new owner deletes other nodes' objects for the service.
   * In every version a node that stops announcing deletes its own object.
   */
  statusVersion?: '0.14.4' | '0.15' | '0.16';
  /** MetalLB's --ignore-exclude-lb: the exclude label does not take a node out of the election. */
  ignoreExcludeLb?: boolean;
}

interface L2State extends KubeObject {
  status?: {
    node?: string;
    serviceName?: string;
    serviceNamespace?: string;
    interfaces?: { name?: string }[];
  };
}

const parsed = JSON.parse(process.argv[2] ?? '{}') as Partial<SpeakerSimConfig>;
const cfg = { ...parsed, node: parsed.node || process.env.NODE_NAME || '' } as SpeakerSimConfig;
const statusVersion = cfg.statusVersion ?? '0.16';
if (!cfg.node) throw new Error('speaker-sim: no node name (config "node" or $NODE_NAME)');
const port = cfg.port ?? 7946;
const probeIntervalMs = cfg.probeIntervalMs ?? cfg.heartbeatMs ?? 200;
const deadMs = cfg.deadMs ?? 5000;
const log = createLogger(`speaker-sim-${cfg.node}`, process.env.SIM_LOG_LEVEL ?? 'warn');
const emit = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);

const client = new KubeClient(kubeconfigAuth({ kubeconfig: cfg.kubeconfig }), {
  userAgent: `speaker-sim/${cfg.node}`,
});
let frozen = false;
// Declared before anything async: memberlist datagrams and timers use them from the start.
let announced = new Set<string>();
let running: Promise<void> | undefined;
let dirty = false;
let stopping = false;
/** An API change reached this speaker: MetalLB reprocesses its services and re-arms their GARP. */
let resyncPending = false;
/** The API view's informers, once created (after the first API read). */
let apiInformers: Informer[] = [];
/** Every informer has listed once: the view an election may use. */
const viewSynced = () => apiInformers.length > 0 && apiInformers.every((i) => i.hasSynced);
const startedAt = Date.now();
// Like memberlist joining: hear the peers before deciding anything, or every speaker would
// briefly think it is alone and announce everything.
const joinMs = Math.max(3 * probeIntervalMs, 600);
// This process' memberlist incarnation: a restarted speaker is a new one, so peers that saw it
// leave take it back at its first ack.
const incarnation = Date.now();
const view = newMemberView();
// The API view the election uses; frozen = not updated any more.
const nodes = new Map<string, Node>();
const services = new Map<string, Service>();
const slices = new Map<string, EndpointSlice>();
const pools = new Map<string, IPAddressPool>();
const l2ads = new Map<string, L2Advertisement>();
const statuses = new Map<string, L2State>();

// --- wire ---------------------------------------------------------------------------------
const wires = new Wires(cfg.ifaces ?? [cfg.iface], (iface, code) => {
  if (!stopping) {
    log.error({ iface, code }, 'wire helper exited');
    process.exit(1);
  }
});

// --- memberlist: probe/ack ----------------------------------------------------------------
const sock = dgram.createSocket({ type: 'udp4', reuseAddr: true });
// A memberlist cut (nft output drop) fails sends with EPERM: like a real speaker, carry on.
sock.on('error', (e) => log.debug({ err: e.message }, 'memberlist socket error'));
/** Settles once the datagram has left (or failed): a socket closed before then drops it. */
const send = (m: MemberMsg, ip: string, toPort = port) =>
  new Promise<void>((sent) =>
    sock.send(Buffer.from(JSON.stringify(m)), toPort, ip, (err) => {
      if (err) log.debug({ err: err.message, to: ip, type: m.type }, 'memberlist send failed');
      sent();
    }),
  );
const peerIP = new Map(cfg.peers.map((p) => [p.node, p.ip]));
sock.on('message', (buf, rinfo) => {
  let m: MemberMsg;
  try {
    m = JSON.parse(buf.toString()) as MemberMsg;
    if (typeof m?.node !== 'string' || !['ping', 'ack', 'leave'].includes(m.type)) return;
  } catch {
    return; // not ours
  }
  // Once it has left, this member answers nothing: its acks would bring it back.
  if (stopping) return;
  const reply = receive(view, cfg.node, incarnation, m, Date.now());
  // memberlist acks to the address and port the ping came from.
  if (reply) send(reply, rinfo.address, rinfo.port);
  if (m.type !== 'ping') schedule();
});
await new Promise<void>((resolve) => sock.bind(port, '0.0.0.0', () => resolve()));
const probe = () => {
  const peers = cfg.peers.map((p) => p.node);
  for (const { to, msg } of probeRound(view, cfg.node, incarnation, peers, Date.now(), deadMs)) {
    const ip = peerIP.get(to);
    if (ip) send(msg, ip);
  }
};
probe();
const probeTimer = setInterval(probe, probeIntervalMs);

// --- API view -----------------------------------------------------------------------------
const sliceVersion = await endpointSliceVersion(client);

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
      if (into === nodes && nodeLagMs > 0) return lagNodes(objs);
      copyInto(objs, into);
      resyncPending = true;
      schedule();
    },
  });
  views.push([inf, into]);
  inf.start();
  return inf;
};

// stdin "node-lag <ms>": Node changes reach this speaker's election that much later, as through an
// informer lagging behind the API (0: at once); the other informers are not delayed. A new owner
// that sees a fenced node's exclude label late re-elects it once memberlist hears it again.
let nodeLagMs = 0;
function lagNodes(objs: ReadonlyMap<string, KubeObject>): void {
  const snapshot = new Map(objs);
  // Every change waits the same time, so they apply in order.
  setTimeout(() => {
    if (frozen || stopping) return;
    copyInto(snapshot, nodes as Map<string, KubeObject>);
    resyncPending = true;
    schedule();
  }, nodeLagMs);
}

const metallb = `/apis/metallb.io/v1beta1/namespaces/${cfg.namespace}`;
const informers = [
  informer('/api/v1/nodes', nodes as Map<string, KubeObject>),
  informer('/api/v1/services', services as Map<string, KubeObject>),
  informer(`/apis/discovery.k8s.io/${sliceVersion}/endpointslices`, slices as Map<string, KubeObject>),
  informer(`${metallb}/ipaddresspools`, pools as Map<string, KubeObject>),
  informer(`${metallb}/l2advertisements`, l2ads as Map<string, KubeObject>),
  ...(cfg.noCrd ? [] : [informer(`${metallb}/servicel2statuses`, statuses)]),
];
apiInformers = informers;

// --- election and announcing --------------------------------------------------------------

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

const statusName = (svc: string, node: string) => `${svc}-${node}`.toLowerCase().slice(0, 253);
/** The last ShouldAnnounce reason per service, to log changes only. */
const reasons = new Map<string, string>();
/** Services won whose advertisements list only interfaces this node lacks (logged once). */
const noInterface = new Set<string>();

async function reconcile(): Promise<void> {
  // No election on a view not built yet: MetalLB's controllers start once the manager's caches
  // have synced. A peer's datagram can come while the first API read is still waiting.
  if (!viewSynced()) return;
  if (Date.now() - startedAt < joinMs) return;
  const live = liveMembers(cfg.node, view, Date.now(), deadMs);
  // Services this node announces, by namespace/name, with the IPs it announces for each and the
  // interfaces its advertisements list (none: every interface).
  const mine = new Map<string, { svc: Service; ips: string[]; interfaces: string[] }>();
  const onIface = new Map<string, Set<string>>();
  for (const [key, svc] of services) {
    const d = shouldAnnounce({
      self: cfg.node,
      service: svc,
      endpointSlices: slices.values(),
      pools: pools.values(),
      l2Advertisements: l2ads.values(),
      nodes: nodes.values(),
      live,
      ignoreExcludeLb: cfg.ignoreExcludeLb ?? false,
    });
    if (reasons.get(key) !== d.reason) {
      reasons.set(key, d.reason);
      log.info(
        { service: key, reason: d.reason || 'announcing', candidates: d.candidates },
        'shouldAnnounce',
      );
    }
    if (d.reason !== '') continue;
    const on = wires.interfaces.filter((i) => d.interfaces.length === 0 || d.interfaces.includes(i));
    if (on.length === 0) {
      // SetBalancer: the advertisement's interfaces are not on this node; not announced.
      if (!noInterface.has(key))
        log.warn({ service: key, interfaces: d.interfaces }, 'the interfaces to announce on do not exist');
      noInterface.add(key);
      continue;
    }
    noInterface.delete(key);
    mine.set(key, { svc, ips: d.ips, interfaces: d.interfaces });
    for (const i of on) for (const ip of d.ips) onIface.set(i, (onIface.get(i) ?? new Set()).add(ip));
  }
  const next = new Set([...mine.values()].flatMap((m) => m.ips));
  // Answered first, then the status: wires.announce resolves once the helpers answer.
  const rewired = await wires.announce(onIface);
  if ([...next].some((v) => !announced.has(v)) || [...announced].some((v) => !next.has(v))) {
    announced = next;
    emit({ ev: 'announce', node: cfg.node, vips: [...next].sort(), t: Date.now() });
  } else if (!rewired && resyncPending && next.size > 0) {
    // A resync of VIPs it already owns re-arms their gratuitous ARP / unsolicited NAs (once, then
    // every 1.1 s for 5 s).
    wires.regarp();
  }
  resyncPending = false;
  if (frozen || cfg.noCrd || cfg.noStatusWrites) return;
  await syncStatuses(mine);
}

async function syncStatuses(mine: Map<string, { svc: Service; interfaces: string[] }>): Promise<void> {
  const base = `/apis/metallb.io/v1beta1/namespaces/${cfg.namespace}/servicel2statuses`;
  const mineKeys = new Set(mine.keys());
  const labelsOf = (o: L2State) => o.metadata?.labels ?? {};
  const serviceOf = (o: L2State) =>
    statusVersion === '0.14.4'
      ? // No serviceName in 0.14.4–0.14.5: the object's name says it.
        [...mineKeys].find((k) => o.metadata?.name === statusName(k.split('/')[1] ?? '', cfg.node))
      : `${o.status?.serviceNamespace}/${o.status?.serviceName}`;
  const writeStatus = async (obj: L2State, ns: string, name: string, interfaces: string[]) =>
    client.replace(
      `${base}/${obj.metadata?.name}/status`,
      {
        ...obj,
        status: {
          node: cfg.node,
          ...(statusVersion === '0.14.4' ? {} : { serviceName: name, serviceNamespace: ns }),
          // MetalLB lists interfaces only when the L2Advertisements name them; its default names none.
          interfaces: interfaces.map((i) => ({ name: i })),
        },
      },
      { retries: 3 },
    );
  for (const { svc: s, interfaces } of mine.values()) {
    const ns = s.metadata?.namespace ?? '';
    const name = s.metadata?.name ?? '';
    const forService = [...statuses.values()].filter((o) =>
      statusVersion === '0.14.4'
        ? o.metadata?.name === statusName(name, cfg.node)
        : labelsOf(o)['metallb.io/service-name'] === name &&
          labelsOf(o)['metallb.io/service-namespace'] === ns,
    );
    const own = forService.find((o) => o.status?.node === cfg.node);
    if (!own) {
      const labels = {
        'metallb.io/node': cfg.node,
        'metallb.io/service-name': name,
        'metallb.io/service-namespace': ns,
      };
      // 0.14.6–0.15.x reuse an object another node left for the service (#2712, #2930).
      const reuse = statusVersion === '0.15' ? forService[0] : undefined;
      let obj: L2State;
      if (reuse) {
        obj = await client.replace<L2State>(`${base}/${reuse.metadata?.name}`, {
          ...reuse,
          metadata: { ...reuse.metadata, labels: { ...labelsOf(reuse), ...labels } },
        });
      } else {
        const objName = statusName(name, cfg.node);
        const named = statusVersion === '0.14.4' || statusVersion === '0.16';
        const body = {
          apiVersion: 'metallb.io/v1beta1',
          kind: 'ServiceL2Status',
          metadata: {
            ...(named ? { name: objName } : { generateName: 'l2-' }),
            namespace: cfg.namespace,
            ...(statusVersion === '0.14.4' ? {} : { labels }),
          },
          spec: {},
        };
        try {
          obj = await client.create<L2State>(base, body, { retries: 3 });
        } catch (e) {
          if (!named) throw e;
          obj = await client.get<L2State>(`${base}/${objName}`);
        }
      }
      await writeStatus(obj, ns, name, interfaces);
    } else if (
      JSON.stringify((own.status?.interfaces ?? []).map((i) => i.name ?? '').sort()) !==
      JSON.stringify(interfaces)
    ) {
      // Its advertisements' interfaces changed: the reconcile patches the status.
      await writeStatus(own, ns, name, interfaces);
    }
    // v0.16: other nodes' objects for a service this node now announces are removed.
    if (statusVersion === '0.16')
      for (const o of forService)
        if (o.status?.node && o.status.node !== cfg.node)
          await client.delete(`${base}/${o.metadata?.name}`).catch(() => undefined);
  }
  // A node that stops announcing deletes its own objects (every version since 0.14.4).
  for (const o of statuses.values()) {
    if (o.status?.node !== cfg.node) continue;
    const key = serviceOf(o);
    if (!key || !mineKeys.has(key)) await client.delete(`${base}/${o.metadata?.name}`).catch(() => undefined);
  }
}

// Liveness changes with time, not only with events.
const tick = setInterval(schedule, 100);

createInterface({ input: process.stdin }).on('line', (line) => {
  const cmd = line.trim();
  if (cmd === 'freeze') frozen = true;
  const lag = /^node-lag (\d+)$/.exec(cmd);
  if (lag) nodeLagMs = Number(lag[1]);
  if (cmd === 'unfreeze') {
    frozen = false;
    // Catch up at once, like a local apiserver that syncs again (Node changes through node-lag).
    for (const [inf, into] of views)
      if (into === nodes && nodeLagMs > 0) lagNodes(inf.objects);
      else copyInto(inf.objects, into);
  }
  emit({ ev: cmd, node: cfg.node });
  schedule();
});

async function shutdown(): Promise<void> {
  // Like the real speaker: its controllers stop first (ARP answering ends, no goodbye ARP), and
  // only then does it leave memberlist, so peers take over a moment after the answers stop.
  emit({ ev: 'sigterm', node: cfg.node, t: Date.now() });
  stopping = true;
  clearInterval(tick);
  clearInterval(viewsTimer);
  await running;
  wires.quit();
  // memberlist's Leave waits (up to its timeout) until the broadcast is sent: a socket closed
  // first would drop the datagrams still queued (with the API down, nothing below takes time).
  await Promise.all(
    cfg.peers
      .filter((p) => p.node !== cfg.node)
      .map((p) => send({ type: 'leave', node: cfg.node, inc: incarnation }, p.ip)),
  );
  clearInterval(probeTimer);
  await Promise.all(informers.map((i) => i.stop()));
  sock.close();
  client.close();
  process.exit(0);
}
process.once('SIGTERM', () => void shutdown());
process.once('SIGINT', () => void shutdown());

// stdout {"ev":"views","current":…} whenever every informer's view becomes current, or one stops
// being so (a failed list or watch, until it lists or watches again): after an API fault the
// informers back off (up to 10 s) before they watch again, and the robustness runner's settle
// waits for every speaker's views before the next trial.
let viewsCurrent = false;
const viewsTimer = setInterval(() => {
  const now = informers.every((i) => i.current);
  if (now === viewsCurrent || stopping) return;
  viewsCurrent = now;
  emit({ ev: 'views', node: cfg.node, current: now, t: Date.now() });
}, 100);

const started = Date.now();
const readyTimer = setInterval(() => {
  if (viewSynced() && Date.now() - startedAt >= joinMs) {
    clearInterval(readyTimer);
    emit({ ev: 'ready', node: cfg.node, ms: Date.now() - started });
  }
}, 20);
