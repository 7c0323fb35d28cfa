// The L2 test world, shared by the e2e tests and `make bench-l2`: a switch with speaker nodes and
// a client, the real API server reachable from the node namespaces, MetalLB's CRD and objects,
// a speaker simulator per node and (optionally) a drainguard sidecar per node.
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { waitFor } from '../shared/clock.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import type { KubeObject, Node } from '../shared/kube/types.ts';
import { macsIn, type ProbeRound, probeRounds, startArpProbe, stopProcess } from './arp-probe.ts';
import { type ControlPlane, startControlPlane } from './control-plane.ts';
import { createTestBed, type TestBed, type TestNode } from './netns.ts';
import { owner } from './sim/speaker/election.ts';

export { macsIn, type ProbeRound };

export const METALLB_NS = 'metallb-system';
export const SIDECAR_PORT = 7480;
const ROOT = new URL('..', import.meta.url).pathname;

export interface Speaker {
  node: TestNode;
  proc: ChildProcess;
  announced: string[];
  lines: Record<string, unknown>[];
  send(cmd: 'freeze' | 'unfreeze'): void;
}

export interface Sidecar {
  node: TestNode;
  proc: ChildProcess;
  output: string[];
}

export interface L2World {
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
  /** Who MetalLB would elect among the given nodes. */
  ownerAmong(nodes: string[]): string;
  startSpeaker(name: string): Promise<Speaker>;
  stopSpeaker(name: string, signal?: NodeJS.Signals): Promise<void>;
  startSidecar(name: string, env?: Record<string, string>): Promise<Sidecar>;
  stopSidecar(name: string, signal?: NodeJS.Signals): Promise<void>;
  sidecarUrl(name: string, path: string): string;
  getNode(name: string): Promise<Node>;
  cordon(name: string, on: boolean): Promise<void>;
  setLabel(name: string, key: string, value: string | null): Promise<void>;
  /** Probe the VIP from the client for `rounds` rounds of `intervalMs`. */
  probe(rounds: number, intervalMs?: number): Promise<ProbeRound[]>;
  startProbe(intervalMs: number, onRound: (r: ProbeRound) => void): ChildProcess;
  nft(name: string, args: string[]): Promise<string>;
  l2Statuses(): Promise<{ node: string; service: string }[]>;
  destroy(): Promise<void>;
}

export async function createL2World(
  opts: {
    nodes?: string[];
    vip?: string;
    sidecarEnv?: Record<string, string>;
    noCrd?: boolean;
    /** The CRD installed, but the speakers write nothing (MetalLB 0.14.4–0.14.5 by default). */
    noStatusWrites?: boolean;
  } = {},
): Promise<L2World> {
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
    return await populate(
      bed,
      cp,
      names,
      vip,
      opts.sidecarEnv ?? {},
      opts.noCrd ?? false,
      opts.noStatusWrites ?? false,
    );
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
  sidecarEnv: Record<string, string>,
  noCrd: boolean,
  noStatusWrites: boolean,
): Promise<L2World> {
  const client = cp.client();
  const k = async (args: string[], input?: string) => {
    const r = await cp.kubectl(args, input === undefined ? {} : { input });
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  // The CRD is MetalLB's, CEL rules (x-kubernetes-validations, Kubernetes 1.25+) included; the
  // 1.20 test server does not know them, so client-side validation is off and the server drops them.
  if (!noCrd) {
    await k(['apply', '--validate=false', '-f', join(ROOT, 'lab/crds/servicel2status.yaml')]);
    await waitFor(
      // Established and served: discovery lists it (kubectl wait races the CRD's first status).
      'ServiceL2Status served',
      async () => (await client.get<{ resources?: unknown[] }>('/apis/metallb.io/v1beta1')).resources?.length,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
  }
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
  for (const n of nodes)
    await client.create(`/api/v1/namespaces/${METALLB_NS}/pods`, {
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
          { name: 'speaker', image: 'metallb/speaker' },
          { name: 'drainguard', image: 'drainguard' },
        ],
      },
    });
  await client.create('/api/v1/namespaces/web/services', {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'www', namespace: 'web' },
    spec: { type: 'LoadBalancer', selector: { app: 'www' }, ports: [{ port: 80, targetPort: 8080 }] },
  });
  const svc = await client.get<KubeObject>('/api/v1/namespaces/web/services/www');
  await client.replace('/api/v1/namespaces/web/services/www/status', {
    ...svc,
    status: { loadBalancer: { ingress: [{ ip: vip }] } },
  });

  // Kubeconfig for processes in the node namespaces: same server (the host's switch address).
  const kubeconfig = join(cp.dir, 'kubeconfig-nodes.json');
  writeFileSync(kubeconfig, readFileSync(cp.kubeconfigPath, 'utf8'), { mode: 0o600 });

  const speakers = new Map<string, Speaker>();
  const sidecars = new Map<string, Sidecar>();
  const peers = nodes.map((n) => ({ node: n.name, ip: n.ipv4 }));

  const world: L2World = {
    bed,
    cp,
    client,
    nodes,
    clientNode: bed.node('client'),
    vip,
    speakers,
    sidecars,
    initialOwner: owner(names, vip) as string,
    ownerAmong: (ns) => owner(ns, vip) as string,
    async startSpeaker(name) {
      const node = bed.node(name);
      const cfg = {
        node: name,
        iface: 'eth0',
        kubeconfig,
        namespace: METALLB_NS,
        peers,
        deadMs: 5000,
        noCrd,
        noStatusWrites,
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
      await waitFor(`speaker ${name} ready`, () => ready || proc.exitCode !== null, { timeoutMs: 30_000 });
      if (proc.exitCode !== null) throw new Error(`speaker ${name} exited with ${proc.exitCode}`);
      return sp;
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
      await waitFor(
        `sidecar ${name} /readyz`,
        async () => {
          if (proc.exitCode !== null)
            throw new Error(`sidecar ${name} exited: ${sc.output.slice(-5).join('\n')}`);
          const r = await fetch(world.sidecarUrl(name, '/readyz'), { signal: AbortSignal.timeout(1000) });
          return r.ok;
        },
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      return sc;
    },
    async stopSidecar(name, signal = 'SIGTERM') {
      const sc = sidecars.get(name);
      if (!sc) return;
      sidecars.delete(name);
      await killWait(sc.proc, signal);
    },
    sidecarUrl: (name, path) => `http://${bed.node(name).ipv4}:${SIDECAR_PORT}${path}`,
    getNode: (name) => client.get<Node>(`/api/v1/nodes/${name}`),
    async cordon(name, on) {
      await client.patch(`/api/v1/nodes/${name}`, { spec: { unschedulable: on ? true : null } }, 'merge');
    },
    async setLabel(name, key, value) {
      await client.patch(`/api/v1/nodes/${name}`, { metadata: { labels: { [key]: value } } }, 'merge');
    },
    startProbe: (intervalMs, onRound) => startArpProbe(bed.node('client'), vip, intervalMs, onRound),
    probe: (rounds, intervalMs = 50) => probeRounds(bed.node('client'), vip, rounds, intervalMs),
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
      for (const n of [...sidecars.keys()]) await world.stopSidecar(n, 'SIGKILL');
      for (const n of [...speakers.keys()]) await world.stopSpeaker(n, 'SIGKILL');
      client.close();
      await cp.stop();
      await bed.destroy();
      rmSync(cp.dir, { recursive: true, force: true });
    },
  };
  return world;
}

export const killWait = stopProcess;
