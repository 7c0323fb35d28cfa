// Background churn for make bench-api, at the rates of a real cluster, none of it on a sidecar's
// own objects (the worst case for a quiet watch: its view never changes while the watch cache
// moves on): every node's kubelet renews its Lease in kube-node-lease every 10 s; other
// components renew their leader Leases every 2 s; Nodes without a sidecar change status and
// workload pods on them change readiness a few times a second.
import { isApiError } from '../../../shared/kube/api-error.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { KubeObject } from '../../../shared/kube/types.ts';
import { WORKLOAD_NS } from './objects.ts';

export interface ChurnOptions {
  /** Every Node (with and without a sidecar): each gets a kubelet Lease renewed every 10 s. */
  nodes: string[];
  /** Nodes whose status changes (none of them a sidecar's). */
  otherNodes: string[];
  /** Workload pods (in WORKLOAD_NS) whose readiness changes. */
  pods: string[];
  nodeStatusPerSecond: number;
  podStatusPerSecond: number;
  /** Leader Leases of other components (controllers, operators, skupper's site leader), renewed every 2 s. */
  componentLeases: { namespace: string; name: string }[];
}

const NODE_LEASE_NS = 'kube-node-lease';
const NODE_LEASE_PERIOD_MS = 10_000;
const COMPONENT_LEASE_PERIOD_MS = 2_000;
const now = () => new Date().toISOString().replace('Z', '000Z');
const lease = (ns: string, name: string, holder: string, seconds: number) => ({
  apiVersion: 'coordination.k8s.io/v1',
  kind: 'Lease',
  metadata: { name, namespace: ns },
  spec: { holderIdentity: holder, leaseDurationSeconds: seconds, renewTime: now(), acquireTime: now() },
});

/** Writes in the background until stop(); counts what it wrote and what failed. */
export class Churn {
  readonly stats = { writes: 0, errors: 0 };
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly client: KubeClient;
  private readonly opts: ChurnOptions;
  private readonly leases = new Map<string, KubeObject>();
  private inFlight = 0;

  constructor(client: KubeClient, opts: ChurnOptions) {
    this.client = client;
    this.opts = opts;
  }

  /** Creates the Leases (once), then starts every stream. */
  async start(): Promise<void> {
    const { nodes, componentLeases } = this.opts;
    for (const ns of [NODE_LEASE_NS])
      await this.client
        .create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } })
        .catch(() => undefined);
    const all = [
      ...nodes.map((n) => [NODE_LEASE_NS, n, n, 40] as const),
      ...componentLeases.map((l) => [l.namespace, l.name, `${l.name}-holder`, 15] as const),
    ];
    await inBatches(all, 32, async ([ns, name, holder, s]) => {
      const path = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`;
      const created = await this.client
        .create<KubeObject>(path, lease(ns, name, holder, s))
        .catch(async (e) => {
          if (!isApiError(e, 409)) throw e;
          return this.client.get<KubeObject>(`${path}/${name}`);
        });
      this.leases.set(`${ns}/${name}`, created);
    });
    this.every(NODE_LEASE_PERIOD_MS / Math.max(nodes.length, 1), cycle(nodes), (n) =>
      this.renew(NODE_LEASE_NS, n),
    );
    const components = componentLeases.map((l) => `${l.namespace}/${l.name}`);
    if (components.length)
      this.every(COMPONENT_LEASE_PERIOD_MS / components.length, cycle(components), (key) => {
        const [ns, name] = key.split('/') as [string, string];
        return this.renew(ns, name);
      });
    if (this.opts.otherNodes.length && this.opts.nodeStatusPerSecond > 0)
      this.every(1000 / this.opts.nodeStatusPerSecond, cycle(this.opts.otherNodes), (n) =>
        this.nodeStatus(n),
      );
    if (this.opts.pods.length && this.opts.podStatusPerSecond > 0)
      this.every(1000 / this.opts.podStatusPerSecond, cycle(this.opts.pods), (p) => this.podStatus(p));
  }

  stop(): void {
    for (const t of this.timers) clearInterval(t);
  }

  /** One write per `ms` (several per timer tick when ms is below a tick); skipped while 64 are in flight. */
  private every(ms: number, next: () => string, write: (name: string) => Promise<unknown>): void {
    const tick = Math.max(ms, 10);
    const perTick = Math.max(1, Math.round(tick / ms));
    this.timers.push(
      setInterval(() => {
        for (let i = 0; i < perTick; i++) {
          if (this.inFlight >= 64) return;
          this.inFlight++;
          write(next())
            .then(
              () => this.stats.writes++,
              () => this.stats.errors++,
            )
            .finally(() => this.inFlight--);
        }
      }, tick),
    );
  }

  private async renew(ns: string, name: string): Promise<void> {
    const key = `${ns}/${name}`;
    const l = this.leases.get(key) as KubeObject & { spec: Record<string, unknown> };
    l.spec.renewTime = now();
    const path = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${name}`;
    try {
      this.leases.set(key, await this.client.replace<KubeObject>(path, l));
    } catch (e) {
      if (isApiError(e, 409)) this.leases.set(key, await this.client.get<KubeObject>(path));
      throw e;
    }
  }

  private nodeStatus(name: string): Promise<unknown> {
    const t = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    return this.client.patch(
      `/api/v1/nodes/${name}/status`,
      {
        status: {
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              reason: 'KubeletReady',
              message: 'kubelet is posting ready status',
              lastHeartbeatTime: t,
            },
          ],
        },
      },
      'strategic',
    );
  }

  private flips = 0;
  private podStatus(name: string): Promise<unknown> {
    const t = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const ready = this.flips++ % 2 === 0 ? 'False' : 'True';
    return this.client.patch(
      `/api/v1/namespaces/${WORKLOAD_NS}/pods/${name}/status`,
      { status: { conditions: [{ type: 'Ready', status: ready, lastTransitionTime: t }] } },
      'strategic',
    );
  }
}

function cycle(names: string[]): () => string {
  let i = 0;
  return () => names[i++ % names.length]!;
}

/** Runs fn over items, `width` at a time. */
export async function inBatches<T>(
  items: readonly T[],
  width: number,
  fn: (item: T) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}
