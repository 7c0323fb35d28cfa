// The lease-handover scene on a real API server: Node objects, router pods whose leader
// container is a client-go candidate simulator, drainguard sidecars as real processes, and
// the kubelet stand-in that stops containers and finishes deletions. Used by the e2e tests
// and by `make bench-lease`.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../../shared/clock.ts';
import { KubeClient } from '../../shared/kube/client.ts';
import type { Lease, Pod } from '../../shared/kube/types.ts';
import { CoordinatedCandidate } from '../sim/coordinated-candidate.ts';
import { type ContainerHandle, KubeletStandIn, type ManagedPod } from '../sim/kubelet.ts';
import {
  type CandidateOptions,
  LeaseCandidate,
  splitBrain,
  type WorkInterval,
} from '../sim/lease-candidate.ts';
import { type ControlPlane, freePort } from './control-plane.ts';
import { START_DEADLINE_MS } from './proc.ts';

const CLI = fileURLToPath(new URL('../../cli/drainguard.ts', import.meta.url));

export interface LogLine {
  level: string;
  msg: string;
  [k: string]: unknown;
}

/** A drainguard sidecar as a process on the host, talking to the test API server. */
export class SidecarProc {
  readonly child: ChildProcess;
  readonly port: number;
  readonly logs: LogLine[] = [];
  readonly stderr: string[] = [];
  readonly exited: Promise<number>;
  exitCode: number | undefined;

  constructor(env: Record<string, string>, port: number) {
    this.port = port;
    this.child = spawn(process.execPath, [CLI, 'sidecar'], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buf = '';
    this.child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      buf += chunk;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        try {
          this.logs.push(JSON.parse(line) as LogLine);
        } catch {
          this.stderr.push(line);
        }
      }
    });
    this.child.stderr?.setEncoding('utf8').on('data', (c: string) => this.stderr.push(c));
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, sig) => {
        this.exitCode = code ?? (sig ? 128 : 1);
        resolve(this.exitCode);
      }),
    );
  }

  async http(path: string): Promise<{ status: number; body: string }> {
    const res = await fetch(`http://127.0.0.1:${this.port}${path}`, { signal: AbortSignal.timeout(3_000) });
    return { status: res.status, body: await res.text() };
  }

  async metric(line: RegExp): Promise<number | undefined> {
    const { body } = await this.http('/metrics');
    for (const l of body.split('\n')) {
      const m = line.exec(l);
      if (m) return Number(l.split(' ').at(-1));
    }
    return undefined;
  }

  /** The container handle the kubelet stand-in uses: SIGTERM, wait; SIGKILL when grace runs out. */
  handle(): ContainerHandle {
    return {
      stop: async () => {
        if (this.exitCode === undefined) this.child.kill('SIGTERM');
        return this.exited;
      },
      kill: () => {
        if (this.exitCode === undefined) this.child.kill('SIGKILL');
      },
    };
  }

  find(pred: (l: LogLine) => boolean): LogLine | undefined {
    return this.logs.find(pred);
  }

  dump(): string {
    return [...this.logs.map((l) => JSON.stringify(l)), ...this.stderr].join('\n');
  }
}

export interface RouterPod {
  name: string;
  node: string;
  identity: string;
  sim: LeaseCandidate;
  sidecar: SidecarProc | undefined;
  managed: ManagedPod;
}

export interface LeaseSceneOptions {
  nodes: string[];
  lease?: string;
  /** Simulator timings; default client-go/skupper's 15 s / 10 s / 2 s. */
  sim?: Partial<
    Pick<CandidateOptions, 'leaseDurationMs' | 'renewDeadlineMs' | 'retryPeriodMs' | 'jitterFactor'>
  >;
  kubeconfig?: string;
  /** How often the kubelet stand-in looks for deletions (exit times are measured, not polled). */
  kubeletPollMs?: number;
  /** Coordinated candidates (lab/sim/coordinated-candidate.ts): the API server's controller elects. */
  coordinated?: boolean;
}

export interface PodOptions {
  name: string;
  node: string;
  labels?: Record<string, string>;
  leaderContainer?: string;
  /** Lease identity of the simulator; default the pod name. */
  identity?: string;
  /** Sidecar env overrides; false = no sidecar (the expiry baseline). */
  sidecar?: Record<string, string> | false;
  /** KUBECONFIG for the sidecar (e.g. a service-account user); default the admin one. */
  sidecarKubeconfig?: string;
  ready?: boolean;
  /** The leader container ignores SIGTERM (only the grace-period kill ends it). */
  leaderIgnoresSigterm?: boolean;
  graceSeconds?: number;
  startSim?: boolean;
}

/** One namespace, its nodes (names prefixed by the namespace: nodes are cluster-wide) and pods. */
export class LeaseScene {
  readonly cp: ControlPlane;
  readonly client: KubeClient;
  readonly ns: string;
  readonly lease: string;
  readonly kubelet: KubeletStandIn;
  readonly pods = new Map<string, RouterPod>();
  readonly allIntervals: WorkInterval[] = [];
  private readonly opts: LeaseSceneOptions;
  readonly nodeNames: Map<string, string> = new Map();
  private readonly clients: KubeClient[] = [];

  constructor(cp: ControlPlane, opts: LeaseSceneOptions, ns?: string) {
    this.cp = cp;
    this.client = cp.client();
    this.ns = ns ?? `lease-${randomBytes(3).toString('hex')}`;
    this.lease = opts.lease ?? 'skupper-site-leader';
    this.kubelet = new KubeletStandIn(this.client, {
      pollMs: opts.kubeletPollMs ?? 50,
      ...(process.env.LEASE_TEST_DEBUG ? { log: (m, f) => console.error(m, f) } : {}),
    });
    this.opts = opts;
  }

  static async create(cp: ControlPlane, opts: LeaseSceneOptions, ns?: string): Promise<LeaseScene> {
    const w = new LeaseScene(cp, opts, ns);
    await w.client.create('/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: w.ns, labels: { 'drainguard-test/ns': w.ns } },
    });
    for (const n of opts.nodes) {
      const name = `${w.ns}-${n}`;
      w.nodeNames.set(n, name);
      await w.client.create('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name } });
    }
    return w;
  }

  node(n: string): string {
    const name = this.nodeNames.get(n);
    if (!name) throw new Error(`scene has no node ${n}`);
    return name;
  }

  sidecarEnv(p: PodOptions, port: number): Record<string, string> {
    return {
      KUBECONFIG: p.sidecarKubeconfig ?? this.opts.kubeconfig ?? this.cp.kubeconfigPath,
      DRAINGUARD_PROFILE: 'skupper-router',
      DRAINGUARD_FEATURES: 'lease-handover',
      DRAINGUARD_LEASES: this.lease,
      DRAINGUARD_POD_NAME: p.name,
      DRAINGUARD_POD_NAMESPACE: this.ns,
      DRAINGUARD_NODE_NAME: this.node(p.node),
      DRAINGUARD_PORT: String(port),
      DRAINGUARD_BIND_ADDRESS: '127.0.0.1',
      DRAINGUARD_LOG_LEVEL: 'info',
      ...(p.sidecar || {}),
    };
  }

  async addPod(p: PodOptions): Promise<RouterPod> {
    const leader = p.leaderContainer ?? 'kube-adaptor';
    const created = await this.client.create<Pod>(`/api/v1/namespaces/${this.ns}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: p.name, labels: p.labels ?? { 'skupper.io/component': 'router' } },
      spec: {
        nodeName: this.node(p.node),
        terminationGracePeriodSeconds: p.graceSeconds ?? 30,
        containers: [
          { name: 'router', image: 'quay.io/skupper/skupper-router:test' },
          { name: leader, image: 'quay.io/skupper/kube-adaptor:test' },
          ...(p.sidecar === false ? [] : [{ name: 'drainguard', image: 'drainguard:test' }]),
        ],
      },
    });
    const simClient = new KubeClient(this.cp.target, { userAgent: 'lease-candidate' });
    this.clients.push(simClient);
    const simOpts = {
      client: simClient,
      namespace: this.ns,
      lease: this.lease,
      identity: p.identity ?? p.name,
    };
    const sim = this.opts.coordinated
      ? new CoordinatedCandidate({ ...simOpts, ...this.opts.sim, watch: simClient })
      : new LeaseCandidate({ ...simOpts, ...this.opts.sim });
    let sidecar: SidecarProc | undefined;
    if (p.sidecar !== false) {
      const port = await freePort();
      sidecar = new SidecarProc(
        { ...this.sidecarEnv(p, port), DRAINGUARD_POD_UID: created.metadata?.uid ?? '' },
        port,
      );
    }
    const leaderHandle: ContainerHandle = p.leaderIgnoresSigterm
      ? { stop: () => new Promise<number>(() => {}), kill: () => void sim.stop() }
      : {
          stop: async () => {
            await sim.stop();
            return 0;
          },
        };
    const managed = await this.kubelet.run(
      this.ns,
      p.name,
      { [leader]: leaderHandle, ...(sidecar ? { drainguard: sidecar.handle() } : {}) },
      p.ready === false ? { ready: { [leader]: false } } : {},
    );
    const rp: RouterPod = {
      name: p.name,
      node: p.node,
      identity: p.identity ?? p.name,
      sim,
      sidecar,
      managed,
    };
    this.pods.set(p.name, rp);
    if (p.startSim !== false) sim.start();
    return rp;
  }

  pod(name: string): RouterPod {
    const p = this.pods.get(name);
    if (!p) throw new Error(`scene has no pod ${name}`);
    return p;
  }

  async readLease(): Promise<Lease> {
    return this.client.get<Lease>(`/apis/coordination.k8s.io/v1/namespaces/${this.ns}/leases/${this.lease}`);
  }

  async waitLeading(name: string, timeoutMs = 30_000): Promise<void> {
    const p = this.pod(name);
    await waitFor(`${name} leading`, () => p.sim.leading, { timeoutMs, intervalMs: 20 });
  }

  async waitSidecarsReady(timeoutMs = START_DEADLINE_MS): Promise<void> {
    for (const p of this.pods.values()) {
      const sc = p.sidecar;
      if (!sc) continue;
      await waitFor(
        `sidecar ${p.name} ready with its Lease read`,
        async () => {
          if (sc.exitCode !== undefined)
            throw new Error(`sidecar ${p.name} exited ${sc.exitCode}:\n${sc.dump()}`);
          return (await sc.metric(/^drainguard_lease_synced\{/)) === 1;
        },
        { timeoutMs, intervalMs: 100 },
      );
    }
  }

  async deletePod(name: string): Promise<void> {
    await this.client.delete(`/api/v1/namespaces/${this.ns}/pods/${name}`);
  }

  intervals(): WorkInterval[] {
    return [...this.pods.values()].flatMap((p) => p.sim.intervals);
  }

  splitBrain() {
    return splitBrain(this.intervals(), Date.now());
  }

  async events(
    reason?: string,
  ): Promise<{ reason: string; message: string; involvedObject: { name: string } }[]> {
    const list = await this.client.get<{
      items: { reason: string; message: string; involvedObject: { name: string } }[];
    }>(`/api/v1/namespaces/${this.ns}/events`);
    return list.items.filter((e) => reason === undefined || e.reason === reason);
  }

  /** Stops every simulator and sidecar still running; removes the nodes (the namespace goes with the control plane). */
  async cleanup(): Promise<void> {
    await this.kubelet.stop();
    for (const p of this.pods.values()) {
      await p.sim.stop();
      if (p.sidecar && p.sidecar.exitCode === undefined) {
        p.sidecar.child.kill('SIGKILL');
        await p.sidecar.exited;
      }
    }
    for (const n of this.nodeNames.values()) await this.client.delete(`/api/v1/nodes/${n}`).catch(() => {});
    this.client.close();
    for (const c of this.clients) c.close();
  }
}
