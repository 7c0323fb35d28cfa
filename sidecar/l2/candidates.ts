// Who else could announce: the wide reads around a handover (the Nodes, the speaker pods, MetalLB's
// pools and L2Advertisements, the EndpointSlices of the Local services announced here), turned into
// candidates by eligibility.ts. Read only while a handover wants them, never in steady state.
import { isApiError } from '../../shared/kube/client.ts';
import type { KubeList, KubeObject, Node, Pod } from '../../shared/kube/types.ts';
import type { ServiceVips } from '../../shared/l2-state.ts';
import type { FeatureContext } from '../feature.ts';
import {
  eligibleFor,
  type MetalLbConfig,
  metallbConfigFrom,
  otherCandidates,
  readyEndpointNodes,
} from './eligibility.ts';

/** The wide reads around a handover: a couple of retries, and a bound so a step never hangs. */
export const WIDE_READ = { retries: 2, timeoutMs: 10_000 };

/** A handover under way re-reads the candidates at most this often. */
const REFRESH_MS = 2_000;
/** A read this old is dropped when a re-read fails (an old "node-b" might be gone). */
const STALE_MS = 10_000;

/** The candidates as last read (a fake in unit tests). */
export interface CandidateView {
  /** Nodes other than this one that could announce; undefined = not known. */
  readonly others: string[] | undefined;
  /** Per service, the candidates MetalLB would let announce it. */
  readonly perService: Record<string, string[]> | undefined;
  /**
   * MetalLB's address pools (every IPAddressPool's `spec.addresses` entries) from the last read
   * that succeeded; undefined when never read. Kept when a later read fails: the fail-safe needs
   * them exactly when the API is gone.
   */
  readonly pools?: string[] | undefined;
  /** Reads the pools alone (at start, and now and then): one list in MetalLB's namespace. */
  readPools?(): Promise<void>;
  /**
   * Reads again: at once when `fresh` (a handover about to start), otherwise at most every 2 s.
   * `isLocal` tells the services with externalTrafficPolicy: Local.
   */
  refresh(
    fresh: boolean,
    services: readonly ServiceVips[],
    isLocal: (service: string) => boolean,
  ): Promise<void>;
}

export class CandidateReader implements CandidateView {
  private readonly ctx: FeatureContext;
  others: string[] | undefined;
  perService: Record<string, string[]> | undefined;
  pools: string[] | undefined;
  private readAt = 0;
  /** discovery.k8s.io version the API serves EndpointSlices in (v1beta1 before Kubernetes 1.21). */
  private sliceVersion: 'v1' | 'v1beta1' = 'v1';
  private warnedMetalLbConfig = false;

  constructor(ctx: FeatureContext) {
    this.ctx = ctx;
  }

  async refresh(
    fresh: boolean,
    services: readonly ServiceVips[],
    isLocal: (service: string) => boolean,
  ): Promise<void> {
    const { ctx } = this;
    if (!fresh && ctx.clock.now() - this.readAt < REFRESH_MS && this.others !== undefined) return;
    try {
      const ownerUid = ctx.drain.pod?.metadata?.ownerReferences?.find((o) => o.controller)?.uid;
      const keys = [...new Set(services.map((s) => s.service))];
      const [nodes, pods, metallb, slices] = await Promise.all([
        ctx.client.get<KubeList<Node>>('/api/v1/nodes', WIDE_READ),
        ownerUid
          ? ctx.client.get<KubeList<Pod>>(`/api/v1/namespaces/${ctx.config.podNamespace}/pods`, WIDE_READ)
          : Promise.resolve({ items: [] } as KubeList<Pod>),
        this.readMetalLbConfig(),
        Promise.all(keys.filter(isLocal).map(async (k) => [k, await this.readyNodesOf(k)] as const)),
      ]);
      const candidates = otherCandidates(nodes.items ?? [], pods.items ?? [], ctx.config.nodeName, ownerUid);
      const labels = new Map(
        (nodes.items ?? []).map((n) => [n.metadata?.name ?? '', n.metadata?.labels ?? {}]),
      );
      const ready = new Map(slices);
      const perService: Record<string, string[]> = {};
      for (const s of services) {
        const local = isLocal(s.service);
        // A Local service with no ready endpoint here is not announced here: not ours to move.
        if (local && !(ready.get(s.service) ?? []).includes(ctx.config.nodeName)) continue;
        perService[s.service] = eligibleFor(
          {
            service: s.service,
            ips: s.ips,
            local,
            readyEndpointNodes: ready.get(s.service) ?? [],
          },
          candidates,
          labels,
          metallb,
        );
      }
      this.others = candidates;
      this.perService = perService;
      this.readAt = ctx.clock.now();
    } catch (e) {
      // A handover about to start must not act on an old read (an earlier drain's "nobody else"
      // would refuse the fail-safe; its "node-b" might be gone): unknown, until the API answers.
      const stale = fresh || ctx.clock.now() - this.readAt > STALE_MS;
      if (stale) {
        this.others = undefined;
        this.perService = undefined;
      }
      ctx.log.warn(
        { err: (e as Error).message },
        stale
          ? 'cannot list candidate nodes; not known'
          : 'cannot list candidate nodes; keeping the last known',
      );
    }
  }

  /** Nodes with a ready endpoint of a service; a failed read fails the whole candidate read. */
  private async readyNodesOf(key: string): Promise<string[]> {
    const [ns, name] = key.split('/') as [string, string];
    const q = `labelSelector=${encodeURIComponent(`kubernetes.io/service-name=${name}`)}`;
    const get = (v: string) =>
      this.ctx.client.get<KubeList<KubeObject>>(
        `/apis/discovery.k8s.io/${v}/namespaces/${ns}/endpointslices?${q}`,
        WIDE_READ,
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
  private async readMetalLbConfig(): Promise<MetalLbConfig | undefined> {
    const base = `/apis/metallb.io/v1beta1/namespaces/${this.ctx.config.metallbNamespace}`;
    try {
      const [pools, ads] = await Promise.all([
        this.ctx.client.get<KubeList<KubeObject>>(`${base}/ipaddresspools`, WIDE_READ),
        this.ctx.client.get<KubeList<KubeObject>>(`${base}/l2advertisements`, WIDE_READ),
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
