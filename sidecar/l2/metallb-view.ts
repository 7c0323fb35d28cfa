// What MetalLB says about the VIPs: its ServiceL2Status objects (who announces which service, and
// when each was written), the Services they name, and — where ServiceL2Status tells nothing —
// every LoadBalancer Service. Read through the API; the handover decides nothing here.
import { Backoff } from '../../shared/backoff.ts';
import { isApiError } from '../../shared/kube/api-error.ts';
import { Informer } from '../../shared/kube/informer.ts';
import { listPaged } from '../../shared/kube/paged-list.ts';
import type { KubeList, KubeObject } from '../../shared/kube/types.ts';
import type { ServiceVips } from '../../shared/l2-state.ts';
import type { FeatureContext } from '../feature.ts';
import type { StatusSource } from './handover/index.ts';
import { NARROW_READ, WIDE_PAGE_SIZE, WIDE_READ } from './read-bounds.ts';

interface ServiceL2Status extends KubeObject {
  status?: {
    node?: string;
    serviceName?: string;
    serviceNamespace?: string;
    interfaces?: { name?: string }[];
  };
}

interface Service extends KubeObject {
  spec?: { type?: string; externalTrafficPolicy?: string };
  status?: { loadBalancer?: { ingress?: { ip?: string }[] } };
}

/** What MetalLB says now, for one observation of the handover. */
export interface MetalLbObservation {
  statusSource: StatusSource;
  /**
   * Decisions can be taken on it: the ServiceL2Status list has arrived and the addresses of the
   * services announced here are read (a half-read view would hand over and fence nothing).
   */
  synced: boolean;
  /** What this node announces (own ServiceL2Status objects; all LB services without them). */
  announced: ServiceVips[];
  /** service -> another node whose ServiceL2Status confirms the running handover. */
  newOwners: Record<string, string>;
  /**
   * Per service this node's ServiceL2Status objects name now, the interfaces they name: none (an
   * empty list) when its L2Advertisements announce on every interface, MetalLB's default. Only
   * what is written now: a name from a status since rewritten or deleted (an L2Advertisement
   * changed) restricts nothing.
   */
  interfaces: Record<string, string[]>;
}

/** MetalLB's side of the handover, as the feature reads it (a fake in unit tests). */
export interface MetalLbView {
  /**
   * Looks for the ServiceL2Status CRD (again, unless known installed: while it is missing, only
   * when a backoff of 30 s doubling to 10 min has passed) and watches it once found.
   */
  checkCrd(): Promise<void>;
  /**
   * The view now. A ServiceL2Status of another node confirms only if written after
   * `handoverStartedAt` by a node in `eligible(service)` (undefined: not known, any node). With no
   * handover started (`handoverStartedAt` undefined) none confirms.
   */
  observe(
    handoverStartedAt: number | undefined,
    eligible: (service: string) => readonly string[] | undefined,
  ): MetalLbObservation;
  /**
   * Whether ServiceL2Status tells who announces what: `servicel2status` when MetalLB writes it;
   * `services` when the CRD is missing (< 0.14.4) or installed with nothing usable in it (0.14.4–0.14.5
   * write objects only with --enable-l2-service-status, and without serviceName): then, as without
   * the CRD, the VIPs are every LoadBalancer Service's and the fence waits the settle time.
   */
  statusSource(): StatusSource;
  /** Re-reads every LoadBalancer Service (what this node may announce without ServiceL2Status). */
  readAllServices(signal?: AbortSignal): Promise<void>;
  /** Re-reads own Services whose last read failed. */
  retryUnreadServices(): void;
  /**
   * Reads the ServiceL2Status objects consistently (from etcd, hedged), in place of a watch that
   * may sit silent on a stale API server; the newer of that read and the watch is the view.
   */
  readStatusesConsistently(): Promise<void>;
  /** Services with externalTrafficPolicy: Local (only nodes with a ready endpoint announce them). */
  isLocal(service: string): boolean;
  stop(): Promise<void>;
}

/** What the fallback reads of a Service: its name, type, traffic policy and addresses. */
function trimService(o: KubeObject): KubeObject {
  const svc = o as Service;
  return {
    metadata: { name: svc.metadata?.name, namespace: svc.metadata?.namespace },
    spec: { type: svc.spec?.type, externalTrafficPolicy: svc.spec?.externalTrafficPolicy },
    status: { loadBalancer: { ingress: svc.status?.loadBalancer?.ingress ?? [] } },
  } as KubeObject;
}

const lbIPs = (svc: Service | undefined) =>
  (svc?.status?.loadBalancer?.ingress ?? []).map((i) => i.ip).filter((ip): ip is string => Boolean(ip));
const objectKey = (o: KubeObject) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

/**
 * When the API server last saw an object written (creation or the latest managedFields entry),
 * for objects that were already there when first listed; -Infinity when it does not say.
 */
function serverWriteTime(o: KubeObject): number {
  const times = [
    o.metadata?.creationTimestamp,
    ...((o.metadata as { managedFields?: { time?: string }[] } | undefined)?.managedFields ?? []).map(
      (m) => m.time,
    ),
  ].map((t) => (t ? Date.parse(t) : Number.NaN));
  const ok = times.filter((t) => Number.isFinite(t));
  return ok.length ? Math.max(...ok) : Number.NEGATIVE_INFINITY;
}

/** Whether the ServiceL2Status CRD is installed, as last checked. */
type CrdPresence = 'installed' | 'missing' | 'unknown';

export class MetalLbReader implements MetalLbView {
  private readonly ctx: FeatureContext;
  /** Called when something read here changed (a reconcile is due). */
  private readonly changed: () => void;
  private readonly statusPath: string;
  private statusCrd: CrdPresence = 'unknown';
  /**
   * While the CRD is missing, when to look again. Asked every 30 s, one discovery GET per node
   * would cost the API server 120 requests an hour each for an answer that rarely changes: the
   * wait doubles from 30 s to 10 min (jittered), so a CRD installed later is found within that.
   */
  private readonly crdRecheck = new Backoff({ baseMs: 60_000, capMs: 600_000 });
  private crdRecheckAt = Number.NEGATIVE_INFINITY;
  private statusInformer: Informer | undefined;
  /**
   * When each ServiceL2Status was last seen written: local clock for what this sidecar saw
   * change; for what was already there at its first list, the API server's write time. Only a
   * status written after the handover started confirms it: older ones linger (MetalLB before 0.16
   * leaves other nodes' objects in place) and may name a node that no longer announces — fencing
   * on one would leave the VIP dark.
   */
  private readonly statusWrittenAt = new Map<string, { rv: string; at: number; server?: boolean }>();
  private readonly services = new Map<string, ServiceVips>();
  private allLbServices: ServiceVips[] = [];
  private readonly localServices = new Set<string>();
  /** Services this node announces whose addresses are not read yet: true while a read is in flight. */
  private readonly unreadServices = new Map<string, boolean>();
  private lastStatusSource: StatusSource | undefined;
  private sawUsableStatus = false;
  /** The last consistent read of the ServiceL2Status objects, until the watch changes the view. */
  private consistentRead: KubeObject[] | undefined;
  private consistentReading = false;

  constructor(ctx: FeatureContext, changed: () => void) {
    this.ctx = ctx;
    this.changed = changed;
    this.statusPath = `/apis/metallb.io/v1beta1/namespaces/${ctx.config.metallbNamespace}/servicel2statuses`;
  }

  observe(
    handoverStartedAt: number | undefined,
    eligible: (service: string) => readonly string[] | undefined,
  ): MetalLbObservation {
    const { nodeName } = this.ctx.config;
    const own: ServiceVips[] = [];
    const newOwners: Record<string, string> = {};
    const interfaces: Record<string, string[]> = {};
    const statusSource = this.statusSource();
    if (statusSource === 'servicel2status') {
      for (const o of this.statusObjects()) {
        const st = (o as ServiceL2Status).status;
        if (!st?.serviceName) continue;
        const key = `${st.serviceNamespace ?? ''}/${st.serviceName}`;
        if (st.node === nodeName) {
          const svc = this.services.get(key);
          if (svc) own.push(svc);
          const names = (st.interfaces ?? []).map((i) => i.name).filter((n): n is string => Boolean(n));
          // One object naming none (every interface) wins: a second for the service is a leftover.
          const prior = interfaces[key];
          interfaces[key] =
            names.length === 0 || prior?.length === 0
              ? []
              : [...new Set([...(prior ?? []), ...names])].sort();
        } else if (st.node && this.confirms(o, st.node, handoverStartedAt, eligible(key)))
          newOwners[key] = st.node;
      }
    }
    return {
      statusSource,
      synced:
        statusSource !== 'servicel2status' ||
        (this.statusInformer?.hasSynced === true && this.unreadServices.size === 0),
      announced: statusSource === 'services' ? this.allLbServices : own,
      newOwners,
      interfaces,
    };
  }

  /** The ServiceL2Status objects: the watch's, unless a consistent read answered after its last change. */
  private statusObjects(): Iterable<KubeObject> {
    return this.consistentRead ?? this.statusInformer?.objects.values() ?? [];
  }

  /**
   * A consistent list (no resourceVersion: read from etcd) of the ServiceL2Status objects, on a
   * new connection if the first is slow (hedged). For a handover awaiting confirmation while API
   * requests fail: the watch a confirmation arrives on may sit on an API server whose etcd member
   * is gone, open and silent, while a peer has long answered for the VIP (bench-seed run 3: dual
   * answers for 5.1 s until the blind-peers fail-safe). A stale server fails this read; a healthy
   * one answers what the watch missed. A changed object's write time is the server's (second
   * precision, as for the first list): when it was seen is not when it was written.
   */
  async readStatusesConsistently(): Promise<void> {
    if (this.statusCrd !== 'installed' || !this.statusInformer?.hasSynced || this.consistentReading) return;
    this.consistentReading = true;
    try {
      const list = await this.ctx.client.get<KubeList>(this.statusPath, NARROW_READ);
      const objects = list.items ?? [];
      for (const o of objects) {
        const k = objectKey(o);
        const v = o.metadata?.resourceVersion ?? '';
        if (this.statusWrittenAt.get(k)?.rv !== v)
          this.statusWrittenAt.set(k, { rv: v, at: serverWriteTime(o), server: true });
        this.refreshService(o as ServiceL2Status);
      }
      this.consistentRead = objects;
      this.changed();
    } catch (e) {
      // Counted by the client as an API failure (the fail-safe's evidence); the next tick retries.
      this.ctx.log.debug({ err: (e as Error).message }, 'consistent ServiceL2Status read failed');
    } finally {
      this.consistentReading = false;
    }
  }

  /**
   * Whether another node's ServiceL2Status can confirm the running handover: written after it
   * started, by a node that could announce (a candidate: same DaemonSet, Ready, schedulable,
   * not excluded). None confirms while no handover has started: the fail-safe can be entered
   * before one (API gone right after a cordon), and every status there is then from before it —
   * lingering, as MetalLB < 0.16 leaves other nodes' objects in place. Taken as handed over, the
   * VIP was dropped outright instead of held until claimed: dark until memberlist declared this
   * node dead (~5 s; issue 42).
   */
  private confirms(
    o: KubeObject,
    node: string,
    handoverStartedAt: number | undefined,
    eligible: readonly string[] | undefined,
  ): boolean {
    if (handoverStartedAt === undefined) return false;
    const written = this.statusWrittenAt.get(objectKey(o));
    // Server timestamps (the first list after a restart) have second precision.
    if (!written || written.at < handoverStartedAt - (written.server ? 1_000 : 0)) return false;
    return eligible === undefined || eligible.includes(node);
  }

  statusSource(): StatusSource {
    if (this.statusCrd === 'unknown') return 'unknown';
    if (this.statusCrd === 'missing') return 'services';
    // Until the list has arrived the synced gate holds every decision.
    if (!this.statusInformer?.hasSynced) return 'servicel2status';
    // Once seen, for good: MetalLB >= 0.14.6 deletes and re-creates objects as VIPs move, so
    // "none right now" mid-handover is not "never written" (that flip once misled a handover).
    for (const o of this.statusInformer.objects.values()) {
      const st = (o as ServiceL2Status).status;
      if (st?.serviceName && st.node) {
        this.sawUsableStatus = true;
        break;
      }
    }
    const source: StatusSource = this.sawUsableStatus ? 'servicel2status' : 'services';
    if (source !== this.lastStatusSource) {
      this.lastStatusSource = source;
      this.ctx.log.info(
        { mode: source },
        this.sawUsableStatus
          ? 'MetalLB writes ServiceL2Status: VIPs and confirmation come from it'
          : 'ServiceL2Status CRD present but nothing usable written (MetalLB 0.14.4–0.14.5 without --enable-l2-service-status): VIPs from LoadBalancer Services, fence after DRAINGUARD_L2_SETTLE_SECONDS',
      );
    }
    return source;
  }

  async checkCrd(): Promise<void> {
    const { ctx } = this;
    if (this.statusCrd === 'installed') return;
    if (this.statusCrd === 'missing' && ctx.clock.now() < this.crdRecheckAt) return;
    const was = this.statusCrd;
    try {
      const list = await ctx.client.get<{ resources?: { name: string }[] }>('/apis/metallb.io/v1beta1', {
        timeoutMs: 5_000,
      });
      this.statusCrd = (list.resources ?? []).some((r) => r.name === 'servicel2statuses')
        ? 'installed'
        : 'missing';
    } catch (e) {
      if (isApiError(e, 404)) this.statusCrd = 'missing';
      else {
        ctx.log.warn({ err: (e as Error).message }, 'cannot tell whether MetalLB has ServiceL2Status yet');
        return;
      }
    }
    if (this.statusCrd === 'installed' && !this.statusInformer) {
      this.statusInformer = new Informer(ctx.client, {
        path: this.statusPath,
        log: ctx.log,
        clock: ctx.clock,
        onChange: (objects, ev) => {
          // The watch is newer than the last consistent read now.
          this.consistentRead = undefined;
          const st = (ev.object as ServiceL2Status | undefined)?.status;
          this.noteStatusWrites(objects, ev);
          if (ev.type === 'SYNC') for (const o of objects.values()) this.refreshService(o as ServiceL2Status);
          else if (st?.node === ctx.config.nodeName && ev.type !== 'DELETED')
            this.refreshService(ev.object as ServiceL2Status);
          this.changed();
        },
      });
      this.statusInformer.start();
    }
    if (this.statusCrd === 'missing') {
      const waitMs = this.crdRecheck.next();
      this.crdRecheckAt = ctx.clock.now() + waitMs;
      if (was !== 'missing')
        ctx.log.warn(
          { recheckBackoff: '30 s doubling to 10 min' },
          'MetalLB ServiceL2Status CRD not found (MetalLB < 0.14.4): handover cannot be confirmed; the fence waits DRAINGUARD_L2_SETTLE_SECONDS instead',
        );
    } else if (was === 'missing') ctx.log.info('MetalLB ServiceL2Status CRD installed: watching it');
  }

  private noteStatusWrites(
    objects: ReadonlyMap<string, KubeObject>,
    ev: { type: string; object?: KubeObject },
  ) {
    const now = this.ctx.clock.now();
    if (ev.type === 'SYNC') {
      // A (re)list: what changed while we were not watching was written after what we knew.
      const first = this.statusWrittenAt.size === 0;
      const seen = new Set<string>();
      for (const o of objects.values()) {
        const k = objectKey(o);
        seen.add(k);
        const was = this.statusWrittenAt.get(k);
        const v = o.metadata?.resourceVersion ?? '';
        if (!was)
          this.statusWrittenAt.set(
            k,
            first ? { rv: v, at: serverWriteTime(o), server: true } : { rv: v, at: now },
          );
        else if (was.rv !== v) this.statusWrittenAt.set(k, { rv: v, at: now });
      }
      for (const k of [...this.statusWrittenAt.keys()]) if (!seen.has(k)) this.statusWrittenAt.delete(k);
    } else if (ev.object) {
      if (ev.type === 'DELETED') this.statusWrittenAt.delete(objectKey(ev.object));
      else
        this.statusWrittenAt.set(objectKey(ev.object), {
          rv: ev.object.metadata?.resourceVersion ?? '',
          at: now,
        });
    }
  }

  /** The LoadBalancer IPs of a Service this node announces (cached: they rarely change). */
  private refreshService(o: ServiceL2Status): void {
    const st = o.status;
    if (st?.node !== this.ctx.config.nodeName || !st.serviceName) return;
    const key = `${st.serviceNamespace ?? ''}/${st.serviceName}`;
    if (!this.unreadServices.get(key)) this.readService(key);
  }

  retryUnreadServices(): void {
    for (const [key, inFlight] of this.unreadServices) if (!inFlight) this.readService(key);
  }

  private readService(key: string): void {
    const [ns, name] = key.split('/') as [string, string];
    // A re-read of a known Service refreshes its addresses without holding decisions.
    if (!this.services.has(key)) this.unreadServices.set(key, true);
    this.ctx.client
      .get<Service>(`/api/v1/namespaces/${ns}/services/${name}`, { retries: 3, timeoutMs: 5_000 })
      .then(
        (svc) => {
          this.services.set(key, { service: key, ips: lbIPs(svc).sort() });
          this.noteTrafficPolicy(key, svc);
          this.unreadServices.delete(key);
          this.changed();
        },
        (e: unknown) => {
          // A deleted Service has nothing left to hand over; any other error is retried by the
          // next reconcile, and decisions wait for it.
          if (isApiError(e, 404)) this.unreadServices.delete(key);
          else if (this.unreadServices.has(key)) this.unreadServices.set(key, false);
          this.ctx.log.warn({ service: key, err: (e as Error).message }, 'cannot read Service');
        },
      );
  }

  async readAllServices(signal?: AbortSignal): Promise<void> {
    try {
      // Paged and trimmed like the handover's other wide reads (candidates.ts): a cluster's
      // Services are thousands, and only LoadBalancers with an address are kept.
      const { items } = await listPaged(this.ctx.client, '/api/v1/services', {
        pageSize: WIDE_PAGE_SIZE,
        trim: trimService,
        timeoutMs: WIDE_READ.timeoutMs,
        hedgeAfterMs: WIDE_READ.hedgeAfterMs,
        ...(signal ? { signal } : {}),
      });
      const lbs = (items as Service[]).filter((s) => s.spec?.type === 'LoadBalancer' && lbIPs(s).length > 0);
      const key = (s: Service) => `${s.metadata?.namespace}/${s.metadata?.name}`;
      for (const s of lbs) this.noteTrafficPolicy(key(s), s);
      this.allLbServices = lbs.map((s) => ({ service: key(s), ips: lbIPs(s).sort() }));
    } catch (e) {
      this.ctx.log.warn({ err: (e as Error).message }, 'cannot list LoadBalancer Services');
    }
  }

  isLocal(service: string): boolean {
    return this.localServices.has(service);
  }

  private noteTrafficPolicy(key: string, svc: Service): void {
    if (svc.spec?.externalTrafficPolicy === 'Local') this.localServices.add(key);
    else this.localServices.delete(key);
  }

  async stop(): Promise<void> {
    await this.statusInformer?.stop();
  }
}
