// The L2 scene, shared by the e2e tests and `make bench-l2`: a switch with speaker nodes and
// a client, the real API server reachable from the node namespaces, MetalLB's CRDs and objects
// (an IPAddressPool `lab` over <segment>.100–.120 and 2001:db8::100–::114 (the nodes' IPv6
// /64), an L2Advertisement `lab` for every node, the
// LoadBalancer Service web/www at <segment>.100 with a ready endpoint on every node; more
// Services through addService), a speaker simulator per node and (optionally) a drainguard
// sidecar per node.
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { waitFor } from '../../shared/clock.ts';
import { isApiError } from '../../shared/kube/api-error.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import type { KubeObject, Node } from '../../shared/kube/types.ts';
import { EXCLUDE_LABEL } from '../../shared/names.ts';
import { owner } from '../sim/speaker/election.ts';
import {
  putEndpoints,
  putL2Config,
  putLoadBalancer,
  waitForMetalLbResources,
} from '../sim/speaker/objects.ts';
import { macsIn, type ProbeRound, probeRounds, startArpProbe, stopProcess } from './arp-probe.ts';
import { type ControlPlane, startControlPlane } from './control-plane.ts';
import { createTestBed, type TestBed, type TestNode } from './netns.ts';
import { START_DEADLINE_MS, sh } from './proc.ts';

export { macsIn, type ProbeRound };

export const METALLB_NS = 'metallb-system';
export const SIDECAR_PORT = 7480;
const ROOT = new URL('../..', import.meta.url).pathname;

export interface Speaker {
  node: TestNode;
  proc: ChildProcess;
  announced: string[];
  lines: Record<string, unknown>[];
  /** freeze/unfreeze the speaker's API view; node-lag <ms>: its Node view lags by that much. */
  send(cmd: 'freeze' | 'unfreeze' | `node-lag ${number}`): void;
}

export interface Sidecar {
  node: TestNode;
  proc: ChildProcess;
  output: string[];
}

export interface L2Scene {
  bed: TestBed;
  cp: ControlPlane;
  client: KubeClient;
  nodes: TestNode[];
  clientNode: TestNode;
  vip: string;
  speakers: Map<string, Speaker>;
  sidecars: Map<string, Sidecar>;
  /** The node that announces the VIP with every node eligible. */
  initialOwner: string;
  /** Who MetalLB would elect among the given nodes for `vip` (default: the scene's VIP). */
  ownerAmong(nodes: string[], vip?: string): string;
  /** `<segment>.<100+n>`: the nth address of the pool (vipAt(0) is the default VIP), up to n = 20. */
  vipAt(n: number): string;
  /** `2001:db8::<100+n hex>`: the nth IPv6 address of the pool, up to n = 20 (on the nodes' /64). */
  vip6At(n: number): string;
  /**
   * Another LoadBalancer Service (type LoadBalancer, `externalTrafficPolicy: Local` when `local`,
   * status ingress `vip`: one address, or one per family for a dual-stack Service) with one ready
   * endpoint on each of `endpointNodes` (an EndpointSlice).
   */
  addService(opts: {
    name: string;
    namespace?: string;
    vip: string | readonly string[];
    local?: boolean;
    endpointNodes: string[];
  }): Promise<void>;
  /** Replaces that Service's endpoints: one ready endpoint per given node (none: no endpoint). */
  setEndpoints(name: string, nodes: string[], namespace?: string): Promise<void>;
  /** `kubeconfig`: the speaker's own (default: the nodes' kubeconfig, straight to the API server). */
  startSpeaker(name: string, opts?: { kubeconfig?: string }): Promise<Speaker>;
  /** A speaker on every node, then a sidecar on every node. */
  startAll(): Promise<void>;
  stopSpeaker(name: string, signal?: NodeJS.Signals): Promise<void>;
  startSidecar(name: string, env?: Record<string, string>): Promise<Sidecar>;
  stopSidecar(name: string, signal?: NodeJS.Signals): Promise<void>;
  sidecarUrl(name: string, path: string): string;
  /** The sidecar's /prestop (the kubelet's preStop hook): its summary per feature. */
  prestop(name: string): Promise<Record<string, { outcome?: string; why?: string }>>;
  /**
   * A speaker pod going away, in the kubelet's order: the speaker's preStop hook (the sidecar's
   * /prestop), then SIGTERM to the speaker, which leaves memberlist on its way out. Its summary.
   */
  podGoingAway(name: string): Promise<Record<string, { outcome?: string; why?: string }>>;
  /**
   * A drain of that node no peer can confirm: every speaker's API view frozen (each keeps
   * announcing and re-elects from its last view; the node's own does not see the label either,
   * as behind a stale API server), the node cordoned, the exclude label awaited. The caller then
   * takes the API away: the fail-safe follows its grace, with the memberlist cut (the pod stays).
   * Returns what unfreezes the speakers.
   */
  drainUnconfirmed(name: string): Promise<() => void>;
  /** Waits until that node's fail-safe fence cuts memberlist; the node's nft ruleset then. */
  memberlistCut(name: string, timeoutMs?: number): Promise<string>;
  /**
   * Waits until that node's exclude label is gone: after an API outage it stays twice the outage,
   * at most 30 s, while the speakers catch up, hence the default 60 s.
   */
  unlabelled(name: string, timeoutMs?: number): Promise<void>;
  getNode(name: string): Promise<Node>;
  cordon(name: string, on: boolean): Promise<void>;
  setLabel(name: string, key: string, value: string | null): Promise<void>;
  /** Probe the VIP from the client for `rounds` rounds of `intervalMs`. */
  probe(rounds: number, intervalMs?: number): Promise<ProbeRound[]>;
  /** The same for any address. */
  probeVip(vip: string, rounds: number, intervalMs?: number): Promise<ProbeRound[]>;
  startProbe(intervalMs: number, onRound: (r: ProbeRound) => void): ChildProcess;
  /** Waits (20 s) until every round of six probes of `vip` is answered by `node`'s MAC alone. */
  answeredOnlyBy(node: string, vip?: string): Promise<void>;
  nft(name: string, args: string[]): Promise<string>;
  l2Statuses(): Promise<{ node: string; service: string }[]>;
  destroy(): Promise<void>;
}

export interface L2SceneOptions {
  nodes?: string[];
  vip?: string;
  sidecarEnv?: Record<string, string>;
  noCrd?: boolean;
  /** The CRD installed, but the speakers write nothing (MetalLB 0.14.4–0.14.5 by default). */
  noStatusWrites?: boolean;
  /**
   * The speakers' ServiceL2Status lifecycle (lab/sim/speaker/speaker.ts); default 0.16. '0.15':
   * other nodes' objects linger, as before MetalLB 0.16.
   */
  statusVersion?: '0.14.4' | '0.15' | '0.16';
  /** The speakers run with MetalLB's --ignore-exclude-lb (their pods' args say so too). */
  ignoreExcludeLb?: boolean;
  /**
   * The interfaces each speaker answers on (default eth0 alone); the test creates any but eth0 on
   * every node before it starts the speakers.
   */
  speakerIfaces?: string[];
}

export async function createL2Scene(opts: L2SceneOptions = {}): Promise<L2Scene> {
  const names = opts.nodes ?? ['node-a', 'node-b', 'node-c'];
  // The host link puts the root namespace on the segment (a documentation /24 no route of the
  // machine uses), so processes in the node namespaces reach the API server there.
  const bed = await createTestBed({ nodes: [...names, 'client'], hostLink: true });
  const hostIP = bed.hostIPv4 as string;
  // The VIP lives on the segment: <segment>.100.
  const vip = opts.vip ?? `${hostIP.split('.').slice(0, 3).join('.')}.100`;
  const cpDir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'drainguard-l2-'));
  process.on('exit', () => rmSync(cpDir, { recursive: true, force: true }));
  let cp: ControlPlane | undefined;
  try {
    // Own state dir outside the drainguard-cp-* prefix: another process' reapLeftovers() removes
    // such dirs while they have no pids.json yet (a race when test runs start together).
    cp = await startControlPlane({ bindAddress: hostIP, sanIPs: [hostIP], dir: cpDir });
    return await populate(bed, cp, names, vip, opts);
  } catch (e) {
    await cp?.stop();
    await bed.destroy();
    rmSync(cpDir, { recursive: true, force: true });
    throw e;
  }
}

async function populate(
  bed: TestBed,
  cp: ControlPlane,
  names: string[],
  vip: string,
  opts: L2SceneOptions,
): Promise<L2Scene> {
  const { sidecarEnv = {}, statusVersion, speakerIfaces } = opts;
  const [noCrd, noStatusWrites, ignoreExcludeLb] = [
    opts.noCrd,
    opts.noStatusWrites,
    opts.ignoreExcludeLb,
  ].map((o) => o ?? false) as [boolean, boolean, boolean];
  const client = cp.client();
  const k = async (args: string[], input?: string) => {
    const r = await cp.kubectl(args, input === undefined ? {} : { input });
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  // The CRDs are MetalLB's, CEL rules (x-kubernetes-validations, Kubernetes 1.25+) included; the
  // 1.20 test server does not know them, so client-side validation is off and the server drops them.
  // IPAddressPool and L2Advertisement exist since MetalLB 0.13, ServiceL2Status since 0.14.4.
  const crds = [
    ['ipaddresspool', 'ipaddresspools'],
    ['l2advertisement', 'l2advertisements'],
    ...(noCrd ? [] : [['servicel2status', 'servicel2statuses']]),
  ];
  for (const [file] of crds)
    await k(['apply', '--validate=false', '-f', join(ROOT, `lab/sim/speaker/crds/${file}.yaml`)]);
  // Established and served: discovery lists them (kubectl wait races the CRD's first status).
  await waitForMetalLbResources(
    client,
    crds.map(([, plural]) => plural as string),
  );
  await client.create('/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: METALLB_NS },
  });
  await client.create('/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: 'web' },
  });
  const nodes = names.map((n) => bed.node(n));
  for (const n of nodes) {
    await client.create('/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: n.name, labels: { 'kubernetes.io/hostname': n.name } },
    });
    const node = await client.get<Node>(`/api/v1/nodes/${n.name}`);
    await client.replace(`/api/v1/nodes/${n.name}/status`, {
      ...node,
      status: {
        conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'test kubelet' }],
        addresses: [{ type: 'InternalIP', address: n.ipv4 }],
      },
    });
  }
  // The speakers' DaemonSet: no controller runs, but its pods must carry a real owner.
  const labels = { app: 'metallb', component: 'speaker' };
  const ds = await client.create<KubeObject>(`/apis/apps/v1/namespaces/${METALLB_NS}/daemonsets`, {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: 'speaker', namespace: METALLB_NS },
    spec: {
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: { containers: [{ name: 'speaker', image: 'metallb/speaker' }] },
      },
    },
  });
  for (const n of nodes) {
    const pod = await client.create<KubeObject>(`/api/v1/namespaces/${METALLB_NS}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: `speaker-${n.name}`,
        namespace: METALLB_NS,
        labels,
        ownerReferences: [
          {
            apiVersion: 'apps/v1',
            kind: 'DaemonSet',
            name: 'speaker',
            uid: ds.metadata?.uid ?? '',
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: {
        nodeName: n.name,
        automountServiceAccountToken: false,
        containers: [
          {
            name: 'speaker',
            image: 'metallb/speaker',
            ...(ignoreExcludeLb ? { args: ['--ignore-exclude-lb'] } : {}),
          },
          { name: 'drainguard', image: 'drainguard' },
        ],
      },
    });
    // Ready, as a kubelet would report it: only a Ready speaker can take a VIP over.
    await client.replace(`/api/v1/namespaces/${METALLB_NS}/pods/speaker-${n.name}/status`, {
      ...pod,
      status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
    });
  }
  // MetalLB's configuration: the pool <segment>.100–.120 (and the VIP if given outside it), one
  // L2Advertisement for every pool and node.
  const segment = vip.split('.').slice(0, 3).join('.');
  const vipAt = (n: number) => `${segment}.${100 + n}`;
  const poolRange = `${vipAt(0)}-${vipAt(20)}`;
  const inRange = (ip: string) => {
    const last = Number(ip.split('.')[3]);
    return ip.startsWith(`${segment}.`) && last >= 100 && last <= 120;
  };
  // IPv6 VIPs on the nodes' 2001:db8::/64 (lab/bed/netns.ts), clear of the nodes' ::1–::fa.
  const vip6At = (n: number) => `2001:db8::${(0x100 + n).toString(16)}`;
  await putL2Config(client, METALLB_NS, [
    poolRange,
    `${vip6At(0)}-${vip6At(20)}`,
    ...(inRange(vip) ? [] : [`${vip}/32`]),
  ]);
  const endpointsOn = (ns: string[]) =>
    ns.map((n) => {
      if (!names.includes(n)) throw new Error(`no node ${n} in this scene`);
      return { node: n, ip: bed.node(n).ipv4 };
    });
  const ensureNamespace = async (name: string) => {
    try {
      await client.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    } catch (e) {
      if (!isApiError(e, 409)) throw e;
    }
  };
  // web/www: a ready endpoint on every node, so every node may announce it.
  await putLoadBalancer(client, { name: 'www', namespace: 'web', vip, endpoints: endpointsOn(names) });

  // Kubeconfig for processes in the node namespaces: same server (the host's switch address).
  const kubeconfig = join(cp.dir, 'kubeconfig-nodes.json');
  writeFileSync(kubeconfig, readFileSync(cp.kubeconfigPath, 'utf8'), { mode: 0o600 });

  const speakers = new Map<string, Speaker>();
  const sidecars = new Map<string, Sidecar>();
  const peers = nodes.map((n) => ({ node: n.name, ip: n.ipv4 }));

  const scene: L2Scene = {
    bed,
    cp,
    client,
    nodes,
    clientNode: bed.node('client'),
    vip,
    speakers,
    sidecars,
    initialOwner: owner(names, vip) as string,
    ownerAmong: (ns, v = vip) => owner(ns, v) as string,
    vipAt,
    vip6At,
    async addService(o) {
      const namespace = o.namespace ?? 'web';
      await ensureNamespace(namespace);
      await putLoadBalancer(client, {
        name: o.name,
        namespace,
        vip: o.vip,
        local: o.local ?? false,
        endpoints: endpointsOn(o.endpointNodes),
      });
    },
    async setEndpoints(name, ns, namespace = 'web') {
      await putEndpoints(client, { name, namespace, endpoints: endpointsOn(ns) });
    },
    async startSpeaker(name, o = {}) {
      const node = bed.node(name);
      const cfg = {
        node: name,
        iface: 'eth0',
        kubeconfig: o.kubeconfig ?? kubeconfig,
        namespace: METALLB_NS,
        peers,
        deadMs: 5000,
        noCrd,
        noStatusWrites,
        ...(statusVersion ? { statusVersion } : {}),
        ...(ignoreExcludeLb ? { ignoreExcludeLb } : {}),
        ...(speakerIfaces ? { ifaces: speakerIfaces } : {}),
      };
      const proc = node.spawn(
        [process.execPath, join(ROOT, 'lab/sim/speaker/speaker.ts'), JSON.stringify(cfg)],
        {
          stdio: ['pipe', 'pipe', 'inherit'],
        },
      );
      const sp: Speaker = {
        node,
        proc,
        announced: [],
        lines: [],
        send: (cmd) => proc.stdin?.write(`${cmd}\n`),
      };
      let ready = false;
      createInterface({ input: proc.stdout! }).on('line', (line) => {
        if (process.env.L2_DEBUG) process.stderr.write(`[speaker ${name}] ${line}\n`);
        try {
          const o = JSON.parse(line) as Record<string, unknown>;
          sp.lines.push(o);
          if (o.ev === 'ready') ready = true;
          if (o.ev === 'announce') sp.announced = o.vips as string[];
        } catch {
          // log noise
        }
      });
      speakers.set(name, sp);
      await waitFor(`speaker ${name} ready`, () => ready || proc.exitCode !== null, {
        timeoutMs: START_DEADLINE_MS,
      });
      if (proc.exitCode !== null) throw new Error(`speaker ${name} exited with ${proc.exitCode}`);
      return sp;
    },
    async startAll() {
      for (const n of nodes) await scene.startSpeaker(n.name);
      for (const n of nodes) await scene.startSidecar(n.name);
    },
    async stopSpeaker(name, signal = 'SIGTERM') {
      const sp = speakers.get(name);
      if (!sp) return;
      speakers.delete(name);
      await killWait(sp.proc, signal);
    },
    async startSidecar(name, env = {}) {
      const node = bed.node(name);
      const proc = node.spawn([process.execPath, join(ROOT, 'cli/drainguard.ts'), 'sidecar'], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
          KUBECONFIG: kubeconfig,
          DRAINGUARD_PROFILE: 'metallb-speaker',
          DRAINGUARD_FEATURES: 'l2-handover',
          DRAINGUARD_POD_NAME: `speaker-${name}`,
          DRAINGUARD_POD_NAMESPACE: METALLB_NS,
          DRAINGUARD_NODE_NAME: name,
          DRAINGUARD_PORT: String(SIDECAR_PORT),
          DRAINGUARD_FAILSAFE_GRACE_SECONDS: '2',
          DRAINGUARD_HANDOVER_BUDGET_SECONDS: '20',
          ...sidecarEnv,
          ...env,
        },
      });
      const sc: Sidecar = { node, proc, output: [] };
      for (const s of [proc.stdout!, proc.stderr!])
        createInterface({ input: s }).on('line', (l) => {
          sc.output.push(l);
          if (process.env.L2_DEBUG) process.stderr.write(`[${name}] ${l}\n`);
        });
      sidecars.set(name, sc);
      try {
        await waitFor(
          `sidecar ${name} /readyz`,
          async () => {
            if (proc.exitCode !== null)
              throw new Error(`sidecar ${name} exited: ${sc.output.slice(-5).join('\n')}`);
            const r = await fetch(scene.sidecarUrl(name, '/readyz'), { signal: AbortSignal.timeout(1000) });
            return r.ok;
          },
          { timeoutMs: START_DEADLINE_MS, intervalMs: 50 },
        );
      } catch (e) {
        // What the sidecar said, and whether the node answers at all (CI: /readyz unanswered for
        // 30 s twice in one run, the cause not seen): its log, its ARP neighbour and its ruleset.
        const [neigh, ruleset] = await Promise.all([
          sh(['ip', 'neigh', 'show', node.ipv4]).then((r) => r.stdout.trim()),
          node.exec(['nft', 'list', 'ruleset']).then((r) => r.stdout.trim()),
        ]);
        throw new Error(
          `${(e as Error).message}\nits output:\n${sc.output.slice(-15).join('\n')}\nhost's neighbour entry: ${neigh || '(none)'}\nnode ruleset:\n${ruleset || '(empty)'}`,
        );
      }
      return sc;
    },
    async stopSidecar(name, signal = 'SIGTERM') {
      const sc = sidecars.get(name);
      if (!sc) return;
      sidecars.delete(name);
      await killWait(sc.proc, signal);
    },
    sidecarUrl: (name, path) => `http://${bed.node(name).ipv4}:${SIDECAR_PORT}${path}`,
    async prestop(name) {
      const res = await fetch(scene.sidecarUrl(name, '/prestop'), { signal: AbortSignal.timeout(30_000) });
      return (await res.json()) as Record<string, { outcome?: string; why?: string }>;
    },
    async podGoingAway(name) {
      const summary = await scene.prestop(name);
      await scene.stopSpeaker(name, 'SIGTERM');
      return summary;
    },
    async drainUnconfirmed(name) {
      const frozen = [...speakers.values()];
      for (const sp of frozen) sp.send('freeze');
      await scene.cordon(name, true);
      await waitFor(
        `${name} labelled`,
        async () => EXCLUDE_LABEL in ((await scene.getNode(name)).metadata?.labels ?? {}),
        { timeoutMs: 20_000, intervalMs: 100 },
      );
      return () => {
        for (const sp of frozen) sp.send('unfreeze');
      };
    },
    memberlistCut: (name, timeoutMs = 30_000) =>
      waitFor(
        `${name}'s fail-safe fence with the memberlist cut`,
        async () => {
          const ruleset = await scene.nft(name, ['list', 'ruleset']);
          return ruleset.includes('th dport @memberlist') ? ruleset : undefined;
        },
        { timeoutMs, intervalMs: 50 },
      ),
    async unlabelled(name, timeoutMs = 60_000) {
      await waitFor(
        `${name}'s exclude label removed`,
        async () => !(EXCLUDE_LABEL in ((await scene.getNode(name)).metadata?.labels ?? {})),
        { timeoutMs, intervalMs: 200 },
      );
    },
    getNode: (name) => client.get<Node>(`/api/v1/nodes/${name}`),
    async cordon(name, on) {
      await client.patch(`/api/v1/nodes/${name}`, { spec: { unschedulable: on ? true : null } }, 'merge');
    },
    async setLabel(name, key, value) {
      await client.patch(`/api/v1/nodes/${name}`, { metadata: { labels: { [key]: value } } }, 'merge');
    },
    startProbe: (intervalMs, onRound) => startArpProbe(bed.node('client'), vip, intervalMs, onRound),
    probe: (rounds, intervalMs = 50) => probeRounds(bed.node('client'), vip, rounds, intervalMs),
    probeVip: (v, rounds, intervalMs = 50) => probeRounds(bed.node('client'), v, rounds, intervalMs),
    async answeredOnlyBy(node, v = vip) {
      await waitFor(
        `only ${node} answers ${v.includes(':') ? 'NDP' : 'ARP'} for ${v}`,
        async () => {
          const rounds = await probeRounds(bed.node('client'), v, 6, 50);
          return macsIn(rounds).join() === bed.node(node).mac && rounds.every((r) => r.macs.length === 1);
        },
        { timeoutMs: 20_000, intervalMs: 50 },
      );
    },
    nft: (name, args) => bed.node(name).run(['nft', ...args]),
    async l2Statuses() {
      if (noCrd) return [];
      const list = await client.get<{ items: { status?: { node?: string; serviceName?: string } }[] }>(
        `/apis/metallb.io/v1beta1/namespaces/${METALLB_NS}/servicel2statuses`,
      );
      return list.items
        .filter((o) => o.status?.node)
        .map((o) => ({ node: o.status?.node ?? '', service: o.status?.serviceName ?? '' }));
    },
    async destroy() {
      for (const n of [...sidecars.keys()]) await scene.stopSidecar(n, 'SIGKILL');
      for (const n of [...speakers.keys()]) await scene.stopSpeaker(n, 'SIGKILL');
      client.close();
      await cp.stop();
      await bed.destroy();
      rmSync(cp.dir, { recursive: true, force: true });
    },
  };
  return scene;
}

export const killWait = stopProcess;
