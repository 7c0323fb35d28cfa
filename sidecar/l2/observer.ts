// What the L2 handover observes before each step (the core's L2Observation): the drain state, the
// own Node's label, MetalLB's view judged by the candidates, the fence read back, and — where a
// handover or the fail-safe needs them — the links to fence and the node's own addresses. Also
// says, once per change, which named interfaces this node lacks.
import { isApiError } from '../../shared/kube/api-error.ts';
import { EXCLUDE_LABEL, LABEL_OWNED_ANNOTATION } from '../../shared/names.ts';
import type { FeatureContext } from '../feature.ts';
import type { CandidateView } from './candidate-view.ts';
import type { FenceSpec } from './fence.ts';
import { fenceLinkPlan } from './fence-links.ts';
import {
  failsafeDue,
  L2_EVENT_REASONS,
  type L2Memory,
  type L2Observation,
  type L2Settings,
  peersMayBeBlind,
  vipsOf,
} from './handover/index.ts';
import type { L2Host } from './host.ts';
import type { MetalLbView } from './metallb-view.ts';
import type { OwnNode } from './own-node.ts';
import { poolRanges, rangeStarts } from './pool-ranges.ts';
import type { HeldEvents } from './reporting.ts';

/** What the observer reads through, and the feature's state it reads. */
export interface ObserverParts {
  ctx: FeatureContext;
  settings: L2Settings;
  metallb: MetalLbView;
  candidates: CandidateView;
  host: L2Host;
  node: OwnNode;
  events: HeldEvents;
  memory(): L2Memory;
  /** The fence as last read back from nft. */
  fence(): FenceSpec | undefined;
  /** Observe-only: the label as pretended. */
  simulatedLabel(): boolean | undefined;
  /** No handover under way and nothing left of one. */
  atRestIdle(): boolean;
}

export class L2Observer {
  private readonly p: ObserverParts;
  /** Interfaces named for the fence that this node lacks (host.fenceLinks), as last checked. */
  missingInterfaces: string[] = [];

  constructor(parts: ObserverParts) {
    this.p = parts;
  }

  /** The missing interfaces as the status and /prestop name them (nothing when none is). */
  missingField(): { missingInterfaces?: string[] } {
    return this.missingInterfaces.length > 0 ? { missingInterfaces: this.missingInterfaces } : {};
  }

  /** MetalLB's view, its owners judged by the candidates' eligibility. */
  metallbView() {
    return this.p.metallb.observe(
      this.p.memory().handoverStartedAt,
      (service) => this.p.candidates.perService?.[service] ?? this.p.candidates.others,
    );
  }

  /**
   * Where no interface is configured or named by ServiceL2Status (MetalLB's default L2Advertisement
   * names none), the fence goes on the links the VIPs' routes use — the VIP's subnet, or the default
   * route — chosen now, never every link: CNI veths and bridges come and go with pods, and on kernels
   * before 6.16 a vanished device name fails the whole nft transaction.
   */
  async observe(): Promise<L2Observation> {
    const { config } = this.p.ctx;
    const drain = this.p.ctx.drain.current;
    const node = this.p.node.current();
    const labels = node?.metadata?.labels ?? {};
    const annotations = node?.metadata?.annotations ?? {};
    const metallb = this.metallbView();
    const { others, perService } = this.p.candidates;
    const observation: L2Observation = {
      now: this.p.ctx.clock.now(),
      draining: drain.draining,
      terminating: drain.terminating,
      drainReason: drain.drainReason,
      hookRestartSeen: drain.hookRestartSeen,
      synced: drain.synced && metallb.synced,
      metallbSynced: metallb.synced,
      apiDownSince: this.p.ctx.api.downSince,
      apiFailedAt: this.p.ctx.api.failedAt,
      excludeLabel: this.p.simulatedLabel() ?? EXCLUDE_LABEL in labels,
      labelOwned: this.p.simulatedLabel() ?? annotations[LABEL_OWNED_ANNOTATION] === 'true',
      statusSource: metallb.statusSource,
      announced: metallb.announced,
      newOwners: metallb.newOwners,
      otherCandidates: others,
      ...(perService ? { serviceCandidates: perService } : {}),
      pools: this.p.candidates.pools,
      ...(this.p.memory().phase === 'failsafe-fenced' && this.p.ctx.api.up
        ? { goneServices: await this.deletedServices() }
        : {}),
      // Resolved below (fenceLinks) where a handover needs them.
      interfaces: [],
      fence: this.p.fence(),
    };
    if (this.p.atRestIdle() && !observation.draining && !observation.terminating) {
      // No handover: no link is needed (and none is read).
      this.p.host.forgetRoutes();
      this.noteMissingInterfaces([], []);
      return observation;
    }
    // The fail-safe fence is due: it needs the node's own addresses (never a VIP), and covers VIPs
    // this node never announced (or does not know: a view emptied by a relist), so the links that
    // reach MetalLB's pools and the default route's link join the VIPs' links.
    const failsafe =
      failsafeDue(this.p.memory(), observation, this.p.settings) ||
      peersMayBeBlind(this.p.memory(), observation, this.p.settings) !== undefined;
    const vips = vipsOf([...this.p.memory().services, ...observation.announced]);
    // MetalLB's pools known (now or remembered): the fail-safe drops only them, no address read.
    const poolsKnown = (this.p.candidates.pools?.length ?? 0) > 0 || (this.p.memory().pools?.length ?? 0) > 0;
    const own = failsafe && !poolsKnown ? await this.p.host.ownAddresses(vips) : undefined;
    const withOwn = own ? { ...observation, ownAddresses: own } : observation;
    const links = await this.p.host.fenceLinks(
      fenceLinkPlan({
        configured: config.l2Interfaces,
        statusInterfaces: metallb.interfaces,
        services: [...this.p.memory().services, ...observation.announced],
        failsafeTargets: failsafe ? [...rangeStarts(this.knownPoolRanges()), 'default'] : [],
        installed: this.p.fence()?.interfaces ?? [],
      }),
    );
    this.noteMissingInterfaces(links.missing, links.interfaces);
    return { ...withOwn, interfaces: [...links.interfaces].sort() };
  }

  /** MetalLB's pools as merged ranges: from the last read, else as remembered by the core. */
  private knownPoolRanges(): string[] {
    const read = this.p.candidates.pools ?? [];
    return read.length > 0 ? poolRanges(read) : (this.p.memory().pools ?? []);
  }

  /** After a fail-safe, with the API back: the services it covered that were deleted meanwhile. */
  private async deletedServices(): Promise<string[]> {
    const gone: string[] = [];
    for (const { service } of this.p.memory().services) {
      const [ns, name] = service.split('/');
      if (!ns || !name) continue;
      await this.p.ctx.client
        .get(`/api/v1/namespaces/${ns}/services/${name}`, { timeoutMs: 5_000 })
        .catch((e: unknown) => {
          if (isApiError(e, 404)) gone.push(service);
        });
    }
    return gone;
  }

  /** Interfaces named for the fence that this node lacks: in `status`, and a Warning Event per change. */
  private noteMissingInterfaces(missing: string[], fencing: string[]): void {
    if (missing.join() === this.missingInterfaces.join()) return;
    this.missingInterfaces = missing;
    if (missing.length === 0) return;
    const { config } = this.p.ctx;
    const source =
      config.l2Interfaces.length > 0 ? 'drainguard.io/l2-interfaces' : "this node's ServiceL2Status objects";
    this.p.events.record(
      'Warning',
      L2_EVENT_REASONS.interfacesMissing,
      `interface${missing.length === 1 ? '' : 's'} ${missing.join(', ')} named by ${source} not on node ${config.nodeName}: not fenced there; the fence goes on ${fencing.join(', ') || '(no interface)'} (interface names differ between nodes: name every node's, or leave drainguard.io/l2-interfaces unset to fence the links the VIPs' routes use)`,
    );
  }
}
