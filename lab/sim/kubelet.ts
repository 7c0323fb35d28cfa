// A kubelet stand-in for tests against a bare API server (no kubelet runs there): it writes
// container states into pod status through the status subresource and, when a pod is
// deleted, stops its containers (through hooks the test provides), records each exit in
// the status, and completes the deletion with grace 0 — the order a real kubelet keeps.
import { type Clock, systemClock } from '../../shared/clock.ts';
import { isApiError } from '../../shared/kube/api-error.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import type { Pod } from '../../shared/kube/types.ts';

/** What the stand-in needs to stop a "container" (a process, a simulator, or nothing at all). */
export interface ContainerHandle {
  /** Asked to stop (SIGTERM); resolves with the exit code once it has exited. */
  stop?(graceMs: number): Promise<number>;
  /** Grace ran out (SIGKILL); must end the container at once. */
  kill?(): void;
}

export interface ManagedContainer {
  handle: ContainerHandle;
  ready: boolean;
  state: 'running' | 'terminated';
  exitCode?: number;
  startedAt: string;
  finishedAt?: string;
  /** Epoch ms of the exit, for measurements. */
  exitedAtMs?: number;
}

export interface ManagedPod {
  namespace: string;
  name: string;
  uid: string;
  containers: Map<string, ManagedContainer>;
  /** Settles when the pod object is gone (deletion completed by the stand-in). */
  deleted: Promise<void>;
  deleting: boolean;
}

export interface KubeletOptions {
  clock?: Clock;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
  /** How often deletions are looked for; the stand-in polls so it works under any RBAC/watch hiccup. */
  pollMs?: number;
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

export class KubeletStandIn {
  private readonly client: KubeClient;
  private readonly clock: Clock;
  private readonly log: (msg: string, fields?: Record<string, unknown>) => void;
  private readonly pollMs: number;
  private readonly pods = new Map<string, ManagedPod>();
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(client: KubeClient, opts: KubeletOptions = {}) {
    this.client = client;
    this.clock = opts.clock ?? systemClock;
    this.log = opts.log ?? (() => {});
    this.pollMs = opts.pollMs ?? 100;
  }

  private key(ns: string, name: string) {
    return `${ns}/${name}`;
  }

  pod(ns: string, name: string): ManagedPod | undefined {
    return this.pods.get(this.key(ns, name));
  }

  /**
   * Takes over an existing pod: marks it Running with every named container running.
   * Containers of the pod spec not named here are reported running with no handle.
   */
  async run(
    ns: string,
    name: string,
    containers: Record<string, ContainerHandle>,
    opts: { ready?: Record<string, boolean>; podIP?: string } = {},
  ): Promise<ManagedPod> {
    const pod = await this.client.get<Pod>(`/api/v1/namespaces/${ns}/pods/${name}`);
    const now = iso(this.clock.now());
    const map = new Map<string, ManagedContainer>();
    for (const c of pod.spec?.containers ?? [])
      map.set(c.name, {
        handle: containers[c.name] ?? {},
        ready: opts.ready?.[c.name] ?? true,
        state: 'running',
        startedAt: now,
      });
    for (const [c, handle] of Object.entries(containers))
      if (!map.has(c))
        map.set(c, { handle, ready: opts.ready?.[c] ?? true, state: 'running', startedAt: now });
    let resolveDeleted!: () => void;
    const managed: ManagedPod = {
      namespace: ns,
      name,
      uid: pod.metadata?.uid ?? '',
      containers: map,
      deleted: new Promise<void>((r) => {
        resolveDeleted = r;
      }),
      deleting: false,
    };
    (managed as ManagedPod & { resolveDeleted: () => void }).resolveDeleted = resolveDeleted;
    this.pods.set(this.key(ns, name), managed);
    await this.writeStatus(managed, opts.podIP);
    this.loop ??= this.watchDeletions();
    return managed;
  }

  /** Flips a container's readiness (e.g. a successor that is not Ready). */
  async setReady(ns: string, name: string, container: string, ready: boolean): Promise<void> {
    const p = this.mustPod(ns, name);
    const c = p.containers.get(container);
    if (!c) throw new Error(`kubelet stand-in: pod ${ns}/${name} has no container ${container}`);
    c.ready = ready;
    await this.writeStatus(p);
  }

  /** Records that a container exited on its own (crash, completion) — no deletion involved. */
  async containerExited(ns: string, name: string, container: string, exitCode = 0): Promise<void> {
    const p = this.mustPod(ns, name);
    const c = p.containers.get(container);
    if (!c) throw new Error(`kubelet stand-in: pod ${ns}/${name} has no container ${container}`);
    this.markExited(c, exitCode);
    await this.writeStatus(p);
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }

  private mustPod(ns: string, name: string): ManagedPod {
    const p = this.pods.get(this.key(ns, name));
    if (!p) throw new Error(`kubelet stand-in does not manage pod ${ns}/${name}; call run() first`);
    return p;
  }

  private markExited(c: ManagedContainer, exitCode: number): void {
    if (c.state === 'terminated') return;
    c.state = 'terminated';
    c.exitCode = exitCode;
    c.exitedAtMs = this.clock.now();
    c.finishedAt = iso(c.exitedAtMs);
    c.ready = false;
  }

  private statusBody(p: ManagedPod, podIP?: string) {
    const statuses: Record<string, unknown>[] = [];
    for (const [name, c] of p.containers)
      statuses.push({
        name,
        image: `sim/${name}:test`,
        imageID: `sim/${name}@sha256:${'0'.repeat(64)}`,
        containerID: `sim://${p.uid}/${name}`,
        ready: c.ready,
        restartCount: 0,
        started: c.state === 'running',
        state:
          c.state === 'running'
            ? { running: { startedAt: c.startedAt } }
            : {
                terminated: {
                  exitCode: c.exitCode ?? 0,
                  reason: (c.exitCode ?? 0) === 0 ? 'Completed' : 'Error',
                  startedAt: c.startedAt,
                  finishedAt: c.finishedAt,
                },
              },
      });
    const allReady = [...p.containers.values()].every((c) => c.ready);
    const now = iso(this.clock.now());
    const cond = (type: string, ok: boolean) => ({
      type,
      status: ok ? 'True' : 'False',
      lastTransitionTime: now,
    });
    return {
      status: {
        phase: 'Running',
        ...(podIP ? { podIP, podIPs: [{ ip: podIP }] } : {}),
        startTime: [...p.containers.values()][0]?.startedAt ?? now,
        conditions: [
          cond('Initialized', true),
          cond('Ready', allReady),
          cond('ContainersReady', allReady),
          cond('PodScheduled', true),
        ],
        containerStatuses: statuses,
      },
    };
  }

  private async writeStatus(p: ManagedPod, podIP?: string): Promise<void> {
    try {
      await this.client.patch(
        `/api/v1/namespaces/${p.namespace}/pods/${p.name}/status`,
        this.statusBody(p, podIP),
        'merge',
        { retries: 5 },
      );
    } catch (e) {
      if (isApiError(e, 404)) return;
      throw e;
    }
  }

  private async watchDeletions(): Promise<void> {
    const signal = this.abort.signal;
    while (!signal.aborted) {
      const byNs = new Map<string, ManagedPod[]>();
      for (const p of this.pods.values())
        if (!p.deleting) byNs.set(p.namespace, [...(byNs.get(p.namespace) ?? []), p]);
      for (const [ns, managed] of byNs) {
        try {
          const list = await this.client.get<{ items?: Pod[] }>(`/api/v1/namespaces/${ns}/pods`, {
            signal,
          });
          const live = new Map((list.items ?? []).map((o) => [o.metadata?.name ?? '', o]));
          for (const p of managed) {
            const obj = live.get(p.name);
            if (!obj || obj.metadata?.uid !== p.uid) {
              p.deleting = true;
              this.finishGone(p);
            } else if (obj.metadata?.deletionTimestamp) {
              p.deleting = true;
              const grace = (obj.metadata as { deletionGracePeriodSeconds?: number })
                .deletionGracePeriodSeconds;
              void this.terminate(p, (grace ?? 30) * 1000);
            }
          }
        } catch (e) {
          if (!signal.aborted) this.log('kubelet stand-in: list failed', { err: (e as Error).message });
        }
      }
      await this.clock.sleep(this.pollMs, signal);
    }
  }

  private finishGone(p: ManagedPod): void {
    this.pods.delete(this.key(p.namespace, p.name));
    (p as ManagedPod & { resolveDeleted: () => void }).resolveDeleted();
  }

  /** Pod deleted: stop every container (in parallel, like a classic pod), record exits, delete with grace 0. */
  private async terminate(p: ManagedPod, graceMs: number): Promise<void> {
    this.log('kubelet stand-in: terminating pod', { pod: `${p.namespace}/${p.name}`, graceMs });
    let writes = Promise.resolve();
    const record = () => {
      writes = writes.then(() => this.writeStatus(p).catch(() => {}));
      return writes;
    };
    await Promise.all(
      [...p.containers.values()].map(async (c) => {
        if (c.state === 'terminated') return;
        const stopped = c.handle.stop ? c.handle.stop(graceMs) : Promise.resolve(0);
        let timer: NodeJS.Timeout | undefined;
        // Grace ran out, or the stand-in itself is stopping (end of test): kill.
        const killed = new Promise<number>((r) => {
          const kill = () => {
            clearTimeout(timer);
            c.handle.kill?.();
            r(137);
          };
          timer = setTimeout(kill, graceMs);
          this.abort.signal.addEventListener('abort', kill, { once: true });
        });
        const code = await Promise.race([stopped, killed]);
        clearTimeout(timer);
        this.markExited(c, code);
        await record();
      }),
    );
    await writes;
    if (this.abort.signal.aborted) return this.finishGone(p);
    try {
      await this.client.delete(`/api/v1/namespaces/${p.namespace}/pods/${p.name}`, {
        body: {
          kind: 'DeleteOptions',
          apiVersion: 'v1',
          gracePeriodSeconds: 0,
          preconditions: { uid: p.uid },
        },
        retries: 5,
      });
    } catch (e) {
      if (!isApiError(e, 404) && !isApiError(e, 409))
        this.log('kubelet stand-in: delete failed', { err: String(e) });
    }
    this.finishGone(p);
  }
}
