// Who else could announce: the wide reads around a handover (the Nodes, the speaker pods), kept
// fresh by a watch, and the narrow ones (MetalLB's pools and L2Advertisements, the EndpointSlices
// of the Local services announced here), turned into candidates by eligibility.ts. Read only while
// a handover wants them, never in steady state.
//
// Bounded: every Node and every speaker pod is read ONCE when a handover starts, in pages
// (paged-list.ts: one page of ~13 KiB Nodes at a time, never the whole list as one buffer), each
// object trimmed to what otherCandidates reads as it arrives; a watch from that list's
// resourceVersion keeps the view fresh until the handover is fenced, given up or over (release()).
// Only a 410 on that watch lists again. Before: every Node and pod, whole, every 2 s until the
// fence — 127.5 MiB peak at 300 Nodes (a 128 Mi container's limit), OOM-killed from 1,000; now
// 68.2 MiB at 5,000 (81.7 when nobody confirms for 30 s), one list (make bench-api's drain).
import { Backoff } from '../../shared/backoff.ts';
import { countsAsApiDown, isApiError } from '../../shared/kube/api-error.ts';
import { Informer } from '../../shared/kube/informer.ts';
import type { KubeList, KubeObject, Node, Pod } from '../../shared/kube/types.ts';
import type { ServiceVips } from '../../shared/l2-state.ts';
import type { FeatureContext } from '../feature.ts';
import type { CandidateView, NarrowRead, Watched } from './candidate-view.ts';
import {
  eligibleFor,
  type MetalLbConfig,
  metallbConfigFrom,
  otherCandidates,
  readyEndpointNodes,
  trimNode,
  trimPod,
} from './eligibility.ts';
import {
  NARROW_READ,
  REFRESH_MS,
  STALE_MS,
  WAITING_REFRESH_MS,
  WIDE_PAGE_SIZE,
  WIDE_READ,
} from './read-bounds.ts';

export class CandidateReader implements CandidateView {
  private readonly ctx: FeatureContext;
  /**
   * Asks for a reconcile: the view a handover found not known may be known now (a failed list
   * listed again, a failed narrow read due again). Without it the handover waits for the next
   * tick, a second while the API answers (issue 23: the label ~1 s after an etcd election).
   */
  private readonly knowable: (reason: string) => void;
  /** A refresh found the view not known: the next list that completes asks for a reconcile. */
  private awaitingKnown = false;
  /** The reconcile asked for when a failed narrow read is due again (aborted on release). */
  private narrowDue: { at: number; timer: AbortController } | undefined;
  others: string[] | undefined;
  perService: Record<string, string[]> | undefined;
  pools: string[] | undefined;
  /** discovery.k8s.io version the API serves EndpointSlices in (v1beta1 before Kubernetes 1.21). */
  private sliceVersion: 'v1' | 'v1beta1' = 'v1';
  private warnedMetalLbConfig = false;
  private nodes: Watched | undefined;
  private pods: Watched | undefined;
  /** The watched view changed since the candidates were computed. */
  private dirty = true;
  /** Wakes a refresh waiting for the first list's pages. */
  private wake: (() => void) | undefined;
  /** When the watched view was last current. */
  private currentAt = 0;
  private narrow: NarrowRead | undefined;
  /** Failed narrow reads back off (a missing grant must not become a read per second). */
  private readonly narrowBackoff = new Backoff({ baseMs: 1_000, capMs: 30_000 });
  /**
   * ... except for a handover about to start whose read failed as the whole API does in an etcd
   * election (5xx, timeout, unreachable; not 429): asked again within a second, so the label follows the
   * API's return (issue 23: the 1 s doubling put it 1.25 s after an election's 1.7 s).
   */
  private readonly narrowStartBackoff = new Backoff({ baseMs: 250, capMs: 1_000 });
  private narrowNotBefore = 0;
  /** The inputs of the candidates as last computed. */
  private computedFor = '';

  constructor(ctx: FeatureContext, knowable: (reason: string) => void = () => {}) {
    this.ctx = ctx;
    this.knowable = knowable;
  }

  private get ownerUid(): string | undefined {
    return this.ctx.drain.pod?.metadata?.ownerReferences?.find((o) => o.controller)?.uid;
  }

  /** The watches of every Node and speaker pod (started once per handover). */
  private watch(): void {
    const { ctx } = this;
    const watched = (path: string, trim: (o: KubeObject) => KubeObject): Watched => {
      const w: Watched = { informer: undefined as unknown as Informer, settled: false, partial: [] };
      w.informer = new Informer(ctx.client, {
        path,
        pageSize: WIDE_PAGE_SIZE,
        pageHedgeAfterMs: WIDE_READ.hedgeAfterMs,
        trim,
        log: ctx.log,
        clock: ctx.clock,
        onListPage: (objects) => {
          if (!w.informer.hasSynced) for (const o of objects) w.partial.push(o);
          this.progressed();
        },
        onChange: () => {
          w.settled = true;
          w.partial = [];
          this.progressed();
        },
        onError: () => {
          w.settled = true;
          this.progressed();
        },
      });
      w.informer.start();
      return w;
    };
    this.nodes ??= watched('/api/v1/nodes', trimNode);
    if (this.ownerUid) this.pods ??= watched(`/api/v1/namespaces/${ctx.config.podNamespace}/pods`, trimPod);
  }

  /** A page, a change or a failure arrived: the view is to be computed again. */
  private progressed(): void {
    this.dirty = true;
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
    // Once per "not known": the lists current again (listed, or the watch back), not per event.
    if (this.awaitingKnown && [this.nodes, this.pods].every((w) => !w || w.informer.current)) {
      this.awaitingKnown = false;
      if (!wake) this.knowable('candidate lists current again');
    }
  }

  /** Until the next page, change or failure, or `ms`. */
  private async nextProgress(ms: number, signal?: AbortSignal): Promise<void> {
    const timer = new AbortController();
    let wake: (() => void) | undefined;
    await Promise.race([
      new Promise<void>((r) => {
        wake = r;
        this.wake = r;
      }),
      this.ctx.clock.sleep(ms, signal ? AbortSignal.any([timer.signal, signal]) : timer.signal),
    ]);
    timer.abort();
    // Woken by the sleep: nobody waits any more (progressed() must not think a refresh does).
    if (this.wake === wake) this.wake = undefined;
  }

  /** The objects of a view: the cache once listed, the pages so far before. */
  private static objectsOf(w: Watched | undefined): KubeObject[] {
    if (!w) return [];
    return w.informer.hasSynced ? [...w.informer.objects.values()] : w.partial;
  }

  async release(): Promise<void> {
    const stopping = [this.nodes, this.pods];
    this.nodes = undefined;
    this.pods = undefined;
    this.narrow = undefined;
    // Unwatched, the view is no longer known: a reconcile that finds a handover wanted after
    // the release (a preStop during it) must not take the last handover's "nobody else" as now.
    this.others = undefined;
    this.perService = undefined;
    this.computedFor = '';
    this.dirty = true;
    this.awaitingKnown = false;
    this.narrowDue?.timer.abort();
    this.narrowDue = undefined;
    await Promise.all(stopping.map((w) => w?.informer.stop()));
  }

  async refresh(
    fresh: boolean,
    services: readonly ServiceVips[],
    isLocal: (service: string) => boolean,
    waiting = false,
    signal?: AbortSignal,
  ): Promise<void> {
    const { ctx } = this;
    const starting = this.nodes === undefined;
    this.watch();
    const watched = [this.nodes, this.pods].filter((w) => w !== undefined);
    // The narrow reads go out while the first pages arrive.
    const narrowKnown = await this.readNarrow(fresh || starting, services, isLocal, waiting, signal);
    // A decision about to be taken waits for the first list — or for enough of it: part of the
    // Nodes and speakers gives part of the candidates (never one too many), so a part in which
    // every service has somewhere to go already proves the handover may start, and at 5,000
    // Nodes it starts after the first page instead of the twentieth. Confirming waits for the
    // new owner to be among the candidates read so far; refusing waits for the whole list.
    if (starting || fresh) {
      const deadline = ctx.clock.now() + WIDE_READ.timeoutMs;
      while (
        !watched.every((w) => w.settled) &&
        !(narrowKnown && this.narrow && this.partialProves(services, isLocal, this.narrow)) &&
        ctx.clock.now() < deadline &&
        !signal?.aborted
      )
        await this.nextProgress(deadline - ctx.clock.now(), signal);
    }
    const now = ctx.clock.now();
    const synced = watched.every((w) => w.informer.hasSynced);
    const current = watched.every((w) => w.informer.current);
    if (current) this.currentAt = now;
    // A handover about to start must not act on an old view (an earlier drain's "nobody else"
    // would refuse the fail-safe; its "node-b" might be gone): unknown, until the API answers.
    const watchedKnown = synced && (current || (!fresh && now - this.currentAt <= STALE_MS));
    if (narrowKnown && this.narrow && !synced && this.partialProves(services, isLocal, this.narrow)) {
      this.computedFor = '';
      return;
    }
    if (!watchedKnown || !narrowKnown || !this.narrow) {
      if (this.others !== undefined)
        ctx.log.warn(
          {
            err: (
              watched.find((w) => w.informer.lastError)?.informer.lastError ?? new Error('not listed yet')
            ).message,
          },
          'cannot list candidate nodes; not known',
        );
      this.others = undefined;
      this.perService = undefined;
      this.computedFor = '';
      if (!watchedKnown) this.awaitingKnown = true;
      // Not when abandoned for the fail-safe: that reconcile decides without reading.
      if (!narrowKnown && !signal?.aborted) this.wakeWhenNarrowDue();
      return;
    }
    const key = JSON.stringify([services, this.narrow.at]);
    if (!this.dirty && this.others !== undefined && key === this.computedFor) return;
    const { others, perService } = this.compute(services, isLocal, this.narrow);
    this.others = others;
    this.perService = perService;
    this.dirty = false;
    this.computedFor = key;
  }

  /**
   * Before the first list is complete: the candidates of the pages so far, published only when
   * every service has one (a part proves that; it cannot prove that one has none).
   */
  private partialProves(
    services: readonly ServiceVips[],
    isLocal: (service: string) => boolean,
    narrow: NarrowRead,
  ): boolean {
    const { others, perService } = this.compute(services, isLocal, narrow);
    if (others.length === 0 || !services.every((s) => (perService[s.service] ?? others).length > 0))
      return false;
    this.others = others;
    this.perService = perService;
    return true;
  }

  private compute(
    services: readonly ServiceVips[],
    isLocal: (service: string) => boolean,
    narrow: NarrowRead,
  ): { others: string[]; perService: Record<string, string[]> } {
    const { ctx } = this;
    const nodes = CandidateReader.objectsOf(this.nodes) as Node[];
    const pods = CandidateReader.objectsOf(this.pods) as Pod[];
    const candidates = otherCandidates(nodes, pods, ctx.config.nodeName, this.ownerUid);
    const labels = new Map(nodes.map((n) => [n.metadata?.name ?? '', n.metadata?.labels ?? {}]));
    const perService: Record<string, string[]> = {};
    for (const s of services) {
      const local = isLocal(s.service);
      const ready = narrow.ready.get(s.service) ?? [];
      // A Local service with no ready endpoint here is not announced here: not ours to move.
      if (local && !ready.includes(ctx.config.nodeName)) continue;
      perService[s.service] = eligibleFor(
        { service: s.service, ips: s.ips, local, readyEndpointNodes: ready },
        candidates,
        labels,
        narrow.metallb,
      );
    }
    return { others: candidates, perService };
  }

  /**
   * MetalLB's config and the Local services' EndpointSlices: small (bounded by the config and one
   * service's endpoints, not by the cluster), re-read at most every 2 s (10 s while waiting), at
   * once when a new Local service shows up; failures back off. False when not known.
   */
  private async readNarrow(
    fresh: boolean,
    services: readonly ServiceVips[],
    isLocal: (service: string) => boolean,
    waiting: boolean,
    signal: AbortSignal | undefined,
  ): Promise<boolean> {
    const { ctx } = this;
    const now = ctx.clock.now();
    const keys = [...new Set(services.map((s) => s.service))].filter(isLocal).sort();
    const locals = keys.join(',');
    // Released at every handover's end: a handover starts with none, so `fresh` needs no re-read
    // here (a decision retried every reconcile must not re-read every reconcile either).
    const due =
      this.narrow === undefined ||
      this.narrow.locals !== locals ||
      now - this.narrow.at >= (waiting ? WAITING_REFRESH_MS : REFRESH_MS);
    if (!due) return true;
    if (now < this.narrowNotBefore) return this.narrowUsable(fresh, locals, now);
    try {
      const [metallb, slices] = await Promise.all([
        this.readMetalLbConfig(signal),
        Promise.all(keys.map(async (k) => [k, await this.readyNodesOf(k, signal)] as const)),
      ]);
      this.narrow = { metallb, ready: new Map(slices), locals, at: ctx.clock.now() };
      this.narrowBackoff.reset();
      this.narrowStartBackoff.reset();
      this.narrowNotBefore = 0;
      return true;
    } catch (e) {
      // Abandoned (the fail-safe is due): no answer, so nothing learnt about the API.
      if (signal?.aborted) return this.narrowUsable(fresh, locals, now);
      // Not a 429: a throttled sidecar must back off as API Priority and Fairness asks.
      const election = countsAsApiDown(isApiError(e) ? e : undefined) && !isApiError(e, 429);
      const waitMs = (fresh && election ? this.narrowStartBackoff : this.narrowBackoff).next();
      this.narrowNotBefore = ctx.clock.now() + waitMs;
      const usable = this.narrowUsable(fresh, locals, now);
      ctx.log.warn(
        { err: (e as Error).message, retryInMs: waitMs },
        usable
          ? 'cannot read MetalLB config or EndpointSlices for the candidates; keeping the last known'
          : 'cannot read MetalLB config or EndpointSlices for the candidates; not known',
      );
      return usable;
    }
  }

  /**
   * One reconcile asked for when the narrow reads, failed and backing off, are due again: at once
   * if they already are (the refresh waited for the lists past the backoff), else by a timer (an
   * earlier due time replaces a later one).
   */
  private wakeWhenNarrowDue(): void {
    const at = this.narrowNotBefore;
    if (at === 0) return;
    const waitMs = at - this.ctx.clock.now();
    if (waitMs <= 0) {
      this.knowable('narrow reads due again');
      return;
    }
    if (this.narrowDue && this.narrowDue.at <= at) return;
    this.narrowDue?.timer.abort();
    const due = { at, timer: new AbortController() };
    this.narrowDue = due;
    void this.ctx.clock.sleep(waitMs, due.timer.signal).then(() => {
      if (due.timer.signal.aborted) return;
      this.narrowDue = undefined;
      this.knowable('narrow reads due again');
    });
  }

  /** The last narrow read may stand in for one that failed or is backing off. */
  private narrowUsable(fresh: boolean, locals: string, now: number): boolean {
    const n = this.narrow;
    if (!n || fresh || n.locals !== locals || now - n.at > STALE_MS) {
      this.narrow = undefined;
      return false;
    }
    return true;
  }

  /** Nodes with a ready endpoint of a service; a failed read fails the whole candidate read. */
  private async readyNodesOf(key: string, signal?: AbortSignal): Promise<string[]> {
    const [ns, name] = key.split('/') as [string, string];
    const q = `labelSelector=${encodeURIComponent(`kubernetes.io/service-name=${name}`)}`;
    const get = (v: string) =>
      this.ctx.client.get<KubeList<KubeObject>>(
        `/apis/discovery.k8s.io/${v}/namespaces/${ns}/endpointslices?${q}`,
        { ...NARROW_READ, signal },
      );
    let list: KubeList<KubeObject>;
    try {
      try {
        list = await get(this.sliceVersion);
      } catch (e) {
        if (!isApiError(e, 404) || this.sliceVersion === 'v1beta1') throw e;
        this.sliceVersion = 'v1beta1';
        list = await get('v1beta1');
      }
    } catch (e) {
      if (!isApiError(e, 403)) throw e;
      // Without the grant nobody can be shown to have an endpoint: the service stays here.
      this.ctx.log.error(
        { service: key, err: (e as Error).message },
        'cannot read EndpointSlices (grant missing?): this externalTrafficPolicy: Local service cannot be handed over',
      );
      return [];
    }
    return readyEndpointNodes((list.items ?? []) as Parameters<typeof readyEndpointNodes>[0]);
  }

  async readPools(): Promise<void> {
    try {
      await this.readMetalLbConfig();
    } catch (e) {
      this.ctx.log.warn(
        { err: (e as Error).message },
        "cannot read MetalLB's address pools; keeping the last known",
      );
    }
  }

  /**
   * MetalLB's IPAddressPools and L2Advertisements (the pools' addresses remembered). Unreadable (no such CRDs before MetalLB 0.13,
   * or no grant): undefined, and L2Advertisement node selectors do not narrow the candidates.
   */
  private async readMetalLbConfig(signal?: AbortSignal): Promise<MetalLbConfig | undefined> {
    const base = `/apis/metallb.io/v1beta1/namespaces/${this.ctx.config.metallbNamespace}`;
    try {
      const [pools, ads] = await Promise.all([
        this.ctx.client.get<KubeList<KubeObject>>(`${base}/ipaddresspools`, { ...NARROW_READ, signal }),
        this.ctx.client.get<KubeList<KubeObject>>(`${base}/l2advertisements`, { ...NARROW_READ, signal }),
      ]);
      const config = metallbConfigFrom(pools.items ?? [], ads.items ?? []);
      this.pools = config.pools.flatMap((p) => p.addresses);
      return config;
    } catch (e) {
      if (!isApiError(e, 404) && !isApiError(e, 403)) throw e;
      if (!this.warnedMetalLbConfig)
        this.ctx.log.warn(
          { err: (e as Error).message },
          'cannot read IPAddressPools/L2Advertisements: L2Advertisement node selectors are not taken into account',
        );
      this.warnedMetalLbConfig = true;
      return undefined;
    }
  }
}
