// The I/O edge of the L2 handover: gathers observations (drain state, the Node, ServiceL2Status
// objects, Services, the nft table), runs the pure core and executes its actions. Everything it
// writes is idempotent; everything it needs after a restart is read back from the Node and nft.
import { Backoff } from '../../shared/backoff.ts';
import { waitFor } from '../../shared/clock.ts';
import { isApiError } from '../../shared/kube/client.ts';
import { Informer } from '../../shared/kube/informer.ts';
import type { KubeList, KubeObject, Node, Pod } from '../../shared/kube/types.ts';
import { L2_PHASES, parseStatus, type ServiceVips } from '../../shared/l2-state.ts';
import { EXCLUDE_LABEL, FENCE_TABLE, LABEL_OWNED_ANNOTATION, STATUS_ANNOTATION } from '../../shared/names.ts';
import { fenceTablesIn, renderUnfence } from '../../shared/net/fence-tables.ts';
import type { Capability, CapabilityContext, CapabilityFactory } from '../capability.ts';
import {
  failsafeDue,
  initialMemory,
  type L2Action,
  type L2Memory,
  type L2Observation,
  type L2Settings,
  needsTick,
  PUBLISHED_PHASE,
  resume,
  settled,
  statusOf,
  step,
  vipsOf,
} from './core.ts';
import {
  eligibleFor,
  type MetalLbConfig,
  metallbConfigFrom,
  otherCandidates,
  readyEndpointNodes,
} from './eligibility.ts';
import { type FenceSpec, parseFence, renderFence } from './fence.ts';
import { ownAddresses, routeDevice } from './routes.ts';

interface ServiceL2Status extends KubeObject {
  status?: {
    node?: string;
    serviceName?: string;
    serviceNamespace?: string;
    interfaces?: { name?: string }[];
  };
}
/** The wide reads around a handover: a couple of retries, and a bound so a step never hangs. */
const WIDE_READ = { retries: 2, timeoutMs: 10_000 };

interface Service extends KubeObject {
  spec?: { type?: string; externalTrafficPolicy?: string };
  status?: { loadBalancer?: { ingress?: { ip?: string }[] } };
}

const lbIPs = (svc: Service | undefined) =>
  (svc?.status?.loadBalancer?.ingress ?? []).map((i) => i.ip).filter((ip): ip is string => Boolean(ip));
const rv = (o: KubeObject | undefined) => Number(o?.metadata?.resourceVersion ?? 0);

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

class L2Handover implements Capability {
  readonly name = 'l2-handover';
  private readonly ctx: CapabilityContext;
  private readonly settings: L2Settings;
  private readonly statusPath: string;
  private mem: L2Memory;
  private fence: FenceSpec | undefined;
  private crd: boolean | undefined;
  private statusInformer: Informer | undefined;
  /**
   * When each ServiceL2Status was last seen written: local clock for what this sidecar saw
   * change; for what was already there at its first list, the API server's write time. Only a status written after the handover started confirms it: older ones
   * linger (MetalLB before 0.16 leaves other nodes' objects in place) and may name a node that
   * no longer announces — fencing on one would leave the VIP dark.
   */
  private readonly statusWrittenAt = new Map<string, { rv: string; at: number; server?: boolean }>();
  private readonly services = new Map<string, ServiceVips>();
  private allLbServices: ServiceVips[] = [];
  private candidates: string[] | undefined;
  /** Per service, the candidates MetalLB would let announce it (read with the candidates). */
  private serviceCandidates: Record<string, string[]> | undefined;
  private candidatesAt = 0;
  /** Services with externalTrafficPolicy: Local (only nodes with a ready endpoint announce them). */
  private readonly localServices = new Set<string>();
  /** discovery.k8s.io version the API serves EndpointSlices in (v1beta1 before Kubernetes 1.21). */
  private sliceVersion: 'v1' | 'v1beta1' = 'v1';
  private warnedMetalLbConfig = false;
  /** The link each VIP's route goes out of (`ip route get`), resolved when a handover needs it. */
  private readonly routeDevs = new Map<string, string | undefined>();
  private readonly seenInterfaces = new Set<string>();
  /** Services this node announces whose addresses are not read yet: true while a read is in flight. */
  private readonly unreadServices = new Map<string, boolean>();
  private lastStatusMode: boolean | undefined;
  private sawUsableStatus = false;
  /** The Node as our own last patch returned it, until the informer has caught up. */
  private patchedNode: Node | undefined;
  /** Observe-only: what the label and fence would be. */
  private simLabel: boolean | undefined;
  private writtenStatus = '';
  private readonly pendingEvents: { type: 'Normal' | 'Warning'; reason: string; message: string }[] = [];
  private readonly abort = new AbortController();
  /**
   * Per action kind, after a failure: not before `at`. The core asks again on every reconcile
   * (it acts on what it observes), so a persistent nft error, a 403 or a 404 must not become a
   * busy loop of execs or PATCHes: capped, jittered backoff, reset by a success.
   */
  private readonly retryGate = new Map<string, { backoff: Backoff; at: number }>();
  private dirty = false;
  private running: Promise<void> | undefined;
  private loop: Promise<void> | undefined;
  private init: Promise<void> | undefined;
  private unsubscribe: (() => void) | undefined;
  private lastCheck = 0;
  private lastProbe = 0;
  private readonly phaseGauge;
  private readonly actionCounter;
  private readonly handoverSeconds;
  private readonly strandedGauge;

  constructor(ctx: CapabilityContext) {
    this.ctx = ctx;
    const c = ctx.config;
    this.settings = {
      handoverBudgetMs: c.handoverBudgetSeconds * 1000,
      settleMs: c.l2SettleSeconds * 1000,
      failsafeGraceMs: c.failsafeGraceSeconds * 1000,
      memberlistPorts: c.memberlistPorts,
      nodeName: c.nodeName,
    };
    this.statusPath = `/apis/metallb.io/v1beta1/namespaces/${c.metallbNamespace}/servicel2statuses`;
    this.mem = initialMemory(ctx.clock.now());
    this.phaseGauge = ctx.metrics.gauge('drainguard_l2_phase', 'L2 handover phase (1 = current).');
    this.actionCounter = ctx.metrics.counter(
      'drainguard_l2_actions_total',
      'L2 handover actions by kind and outcome (observe-only counts as skipped).',
    );
    this.strandedGauge = ctx.metrics.gauge(
      'drainguard_l2_handover_impossible',
      '1 while a drain is refused because no other node could announce the VIPs (never strand a VIP).',
    );
    this.handoverSeconds = ctx.metrics.gauge(
      'drainguard_l2_handover_seconds',
      'Duration of the last L2 handover from start to fence.',
    );
  }

  /** Logged once per episode of "mid-handover, but the drain state is not known". */
  private heldUnsynced = false;

  get memory(): L2Memory {
    return this.mem;
  }

  async start(): Promise<void> {
    const { ctx } = this;
    // Local state first (no API needed); readiness must never wait for the API.
    this.fence = await this.readFence().catch((e: unknown) => {
      ctx.log.error({ err: (e as Error).message }, 'cannot read the nft fence table; assuming none');
      return undefined;
    });
    this.init = this.resumeAndRun();
  }

  private async resumeAndRun(): Promise<void> {
    const { ctx } = this;
    const node = await this.readOwnNode();
    this.mem = resume(
      parseStatus(node?.metadata?.annotations?.[STATUS_ANNOTATION]),
      this.fence,
      ctx.clock.now(),
    );
    if (this.mem.phase !== 'idle')
      ctx.log.info(
        { phase: this.mem.phase, fence: this.fence },
        'resuming L2 handover from Node annotation and nft',
      );
    await this.checkCrd();
    this.unsubscribe = ctx.drain.subscribe(() => this.schedule());
    this.loop = this.tickLoop();
    this.schedule();
  }

  async prestop(): Promise<Record<string, unknown>> {
    const started = this.ctx.clock.now();
    await this.init;
    this.schedule();
    let outcome: string;
    try {
      await waitFor('L2 handover', () => settled(this.mem), {
        timeoutMs: this.settings.handoverBudgetMs,
        clock: this.ctx.clock,
        signal: this.abort.signal,
      });
      outcome =
        this.mem.phase === 'refused'
          ? 'no-other-node'
          : this.mem.phase === 'failsafe-fenced'
            ? 'failsafe-fenced'
            : 'handed-over';
    } catch {
      outcome = 'budget-spent';
    }
    const s = statusOf(this.mem, this.ctx.config.observeOnly);
    return {
      outcome,
      phase: s.phase,
      vips: s.vips,
      handedTo: s.handedTo,
      fenced: s.fenced,
      interfaces: s.interfaces,
      waitedMs: this.ctx.clock.now() - started,
      ...(this.ctx.config.observeOnly ? { observeOnly: true } : {}),
    };
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.init;
    this.unsubscribe?.();
    await this.statusInformer?.stop();
    await this.loop;
    await this.running;
  }

  // --- the reconcile loop ----------------------------------------------------------------

  private schedule(): void {
    this.dirty = true;
    this.running ??= (async () => {
      while (this.dirty && !this.abort.signal.aborted) {
        this.dirty = false;
        try {
          await this.reconcile();
        } catch (e) {
          this.ctx.log.error({ err: (e as Error).message }, 'L2 reconcile failed; retrying');
        }
      }
      this.running = undefined;
    })();
  }

  private async tickLoop(): Promise<void> {
    const { clock } = this.ctx;
    while (!this.abort.signal.aborted) {
      const drain = this.ctx.drain.current;
      const fast = needsTick(this.mem, drain);
      await clock.sleep(fast ? 100 : 1000, this.abort.signal);
      // While the API is down and it matters (draining, fail-safe), ask it directly every
      // second: informers relist with a backoff of up to 10 s, too slow to notice it is back.
      if (
        drain.apiDownSince !== undefined &&
        (drain.draining || drain.terminating || this.mem.phase !== 'idle') &&
        clock.now() - this.lastProbe >= 1_000
      ) {
        this.lastProbe = clock.now();
        await this.ctx.client
          .get(`/api/v1/nodes/${this.ctx.config.nodeName}`, { timeoutMs: 2_000 })
          .catch(() => undefined);
      }
      if (clock.now() - this.lastCheck > 30_000) {
        this.lastCheck = clock.now();
        // Someone may have flushed the ruleset, or installed MetalLB's CRD since.
        this.fence = await this.readFence().catch(() => this.fence);
        if (this.crd !== true) await this.checkCrd();
      }
      this.schedule();
    }
  }

  private async reconcile(): Promise<void> {
    const drain = this.ctx.drain.current;
    const want = drain.draining || drain.terminating;
    const phase = this.mem.phase;
    // Read wide only around a handover: at its start, and (throttled) until it is fenced, so a
    // node excluded meanwhile is seen before the fence.
    // A handover about to start reads fresh; one under way (or refused) at most every 2 s.
    const starting = phase === 'idle' || phase === 'undoing';
    if (want && phase !== 'fenced-confirmed' && phase !== 'fenced-unconfirmed' && phase !== 'failsafe-fenced')
      await this.refreshCandidates(starting);
    if (want && (phase === 'idle' || phase === 'undoing' || phase === 'refused' || phase === 'given-up')) {
      if (this.statusMode() === false) await this.refreshAllLbServices();
    }
    for (const [key, inFlight] of this.unreadServices) if (!inFlight) this.readService(key);
    const before = this.mem;
    const obs = await this.observeWithRoutes();
    const { memory: mem, actions } = step(this.mem, obs, this.settings);
    this.mem = mem;
    const holding = !obs.synced && mem.phase !== 'idle';
    // Routine for a moment after every restart; worth a warning while the API is down.
    if (holding && !this.heldUnsynced)
      this.ctx.log[obs.apiDownSince === undefined ? 'info' : 'warn'](
        { phase: mem.phase, fence: mem.fence !== undefined, apiDownSince: obs.apiDownSince },
        'drain state unknown (API view not synced or own Node missing): L2 handover state kept as is',
      );
    this.heldUnsynced = holding;
    for (const a of actions) await this.execute(a);
    const from = PUBLISHED_PHASE[before.phase];
    const to = PUBLISHED_PHASE[mem.phase];
    if (from !== to) {
      this.ctx.log.info({ from, to, vips: vipsOf(mem.services) }, 'L2 phase');
      if (to === 'fenced' && mem.handoverStartedAt !== undefined)
        this.handoverSeconds.set({}, (this.ctx.clock.now() - mem.handoverStartedAt) / 1000);
    }
    for (const p of L2_PHASES) this.phaseGauge.set({ phase: p }, p === to ? 1 : 0);
    this.strandedGauge.set({}, mem.phase === 'refused' ? 1 : 0);
    this.flushEvents();
    await this.publishStatus();
  }

  /**
   * Whether another node's ServiceL2Status can confirm the running handover: written after it
   * started, by a node that could announce (a candidate: same DaemonSet, Ready, schedulable,
   * not excluded).
   */
  private confirms(o: KubeObject, node: string, service: string): boolean {
    const started = this.mem.handoverStartedAt;
    if (started === undefined) return true;
    const written = this.statusWrittenAt.get(`${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`);
    // Server timestamps (the first list after a restart) have second precision.
    if (!written || written.at < started - (written.server ? 1_000 : 0)) return false;
    const eligible = this.serviceCandidates?.[service] ?? this.candidates;
    return eligible === undefined || eligible.includes(node);
  }

  private currentNode(): Node | undefined {
    const watched = this.ctx.drain.node;
    return this.patchedNode && rv(this.patchedNode) > rv(watched) ? this.patchedNode : watched;
  }

  private observe(): L2Observation {
    const { config } = this.ctx;
    const drain = this.ctx.drain.current;
    const node = this.currentNode();
    const labels = node?.metadata?.labels ?? {};
    const annotations = node?.metadata?.annotations ?? {};
    const own: ServiceVips[] = [];
    const newOwners: Record<string, string> = {};
    const crd = this.statusMode();
    if (crd) {
      for (const o of this.statusInformer?.objects.values() ?? []) {
        const st = (o as ServiceL2Status).status;
        if (!st?.serviceName) continue;
        const key = `${st.serviceNamespace ?? ''}/${st.serviceName}`;
        if (st.node === config.nodeName) {
          const svc = this.services.get(key);
          if (svc) own.push(svc);
          for (const i of st.interfaces ?? []) if (i.name) this.seenInterfaces.add(i.name);
        } else if (st.node && this.confirms(o, st.node, key)) newOwners[key] = st.node;
      }
    }
    const interfaces = config.l2Interfaces.length > 0 ? config.l2Interfaces : [...this.seenInterfaces];
    return {
      now: this.ctx.clock.now(),
      draining: drain.draining,
      terminating: drain.terminating,
      drainReason: drain.drainReason,
      // A decision on a half-read view would hand over nothing ("none announced here") and fence
      // nothing, so wait for the ServiceL2Status list and the addresses of our own services.
      synced:
        drain.synced &&
        (crd !== true || (this.statusInformer?.hasSynced === true && this.unreadServices.size === 0)),
      apiDownSince: drain.apiDownSince,
      excludeLabel: this.simLabel ?? EXCLUDE_LABEL in labels,
      labelOwned: this.simLabel ?? annotations[LABEL_OWNED_ANNOTATION] === 'true',
      statusSource: crd === undefined ? 'unknown' : crd ? 'servicel2status' : 'services',
      announced: crd === false ? this.allLbServices : own,
      newOwners,
      otherCandidates: this.candidates,
      ...(this.serviceCandidates ? { serviceCandidates: this.serviceCandidates } : {}),
      interfaces: [...interfaces].sort(),
      fence: this.fence,
    };
  }

  /**
   * Where no interface is configured or named by ServiceL2Status (MetalLB's default L2Advertisement
   * names none), the fence goes on the links the VIPs' routes use — the VIP's subnet, or the default
   * route — chosen now, never every link: CNI veths and bridges come and go with pods, and on kernels
   * before 6.16 a vanished device name fails the whole nft transaction.
   */
  private async observeWithRoutes(): Promise<L2Observation> {
    const obs = this.observe();
    if (this.mem.phase === 'idle' && !obs.draining && !obs.terminating) this.routeDevs.clear();
    // The fail-safe fence is due: it needs the node's own addresses, and covers VIPs this node
    // never announced, so the default route's link joins the VIPs' links.
    const failsafe = failsafeDue(this.mem, obs, this.settings);
    const own = failsafe ? await this.ownAddresses() : undefined;
    const withOwn = own ? { ...obs, ownAddresses: own } : obs;
    if (obs.interfaces.length > 0) return withOwn;
    const vips = vipsOf([...this.mem.services, ...obs.announced]);
    const targets = failsafe ? [...vips, 'default'] : vips;
    for (const t of targets) if (!this.routeDevs.has(t)) this.routeDevs.set(t, await this.routeDevice(t));
    const devs = new Set(
      targets.map((v) => this.routeDevs.get(v)).filter((d): d is string => d !== undefined),
    );
    return { ...withOwn, interfaces: [...devs].sort() };
  }

  /** The link a VIP's route (or, for 'default', the default route) goes out of. */
  private async routeDevice(vip: string): Promise<string | undefined> {
    const args = vip === 'default' ? ['-j', 'route', 'show', 'default'] : ['-j', 'route', 'get', vip];
    try {
      const out = await this.ctx.runner.run('ip', args);
      return routeDevice(out.stdout);
    } catch (e) {
      this.ctx.log.warn(
        { vip, err: (e as Error).message },
        'no route to the VIP: cannot tell which link to fence',
      );
      return undefined;
    }
  }

  private async ownAddresses(): Promise<string[] | undefined> {
    try {
      const own = ownAddresses((await this.ctx.runner.run('ip', ['-j', 'addr', 'show'])).stdout);
      return own.length > 0 ? own : undefined;
    } catch (e) {
      this.ctx.log.warn(
        { err: (e as Error).message },
        "cannot read the node's addresses: the fail-safe fence covers only the VIPs known here",
      );
      return undefined;
    }
  }

  private async execute(a: L2Action): Promise<void> {
    const { ctx } = this;
    const observe = ctx.config.observeOnly;
    const gate = this.retryGate.get(a.kind);
    if (gate && ctx.clock.now() < gate.at) return;
    try {
      switch (a.kind) {
        case 'event':
          this.recordEvent(a.type, a.reason, observe ? `observe-only, would have: ${a.message}` : a.message);
          return;
        case 'label':
        case 'unlabel': {
          const add = a.kind === 'label';
          if (observe) {
            this.simLabel = add ? true : undefined;
            ctx.log.info({ label: EXCLUDE_LABEL }, `observe-only: would ${a.kind} the Node`);
            this.actionCounter.inc({ action: a.kind, outcome: 'skipped' });
            return;
          }
          this.patchedNode = await ctx.client.patch<Node>(
            `/api/v1/nodes/${ctx.config.nodeName}`,
            {
              metadata: {
                labels: { [EXCLUDE_LABEL]: add ? '' : null },
                annotations: { [LABEL_OWNED_ANNOTATION]: add ? 'true' : null },
              },
            },
            'merge',
            // Few retries: the reconcile loop tries again, and must not stall the fail-safe.
            { retries: 2, timeoutMs: 5_000 },
          );
          break;
        }
        case 'fence':
        case 'unfence': {
          const input = a.kind === 'fence' ? renderFence(a.spec) : renderUnfence();
          const r = await ctx.runner.run('nft', ['-f', '-'], { input, mutates: true, timeoutMs: 5_000 });
          if (r.skipped) this.fence = a.kind === 'fence' ? a.spec : undefined;
          else this.fence = await this.readFence();
          if (a.kind === 'fence' && !r.skipped && !this.fence)
            throw new Error('nft accepted the fence but the table cannot be read back');
          break;
        }
      }
      this.actionCounter.inc({ action: a.kind, outcome: observe ? 'skipped' : 'ok' });
      this.retryGate.delete(a.kind);
    } catch (e) {
      this.actionCounter.inc({ action: a.kind, outcome: 'error' });
      const g = gate ?? { backoff: new Backoff({ baseMs: 200, capMs: 10_000 }), at: 0 };
      const wait = g.backoff.next();
      g.at = ctx.clock.now() + wait;
      this.retryGate.set(a.kind, g);
      ctx.log.error(
        {
          action: a.kind,
          err: (e as Error).message,
          retryInMs: wait,
          attempt: g.backoff.attempts,
          ...(isApiError(e, 404) ? { hint: 'own Node not found (deleted?)' } : {}),
        },
        'L2 action failed; will retry',
      );
    }
  }

  private recordEvent(type: 'Normal' | 'Warning', reason: string, message: string): void {
    if (reason === 'L2FailsafeFence') this.ctx.log.error({ reason }, message);
    // Events written while the API is down would be lost: keep them until it answers again.
    this.pendingEvents.push({ type, reason, message });
    this.flushEvents();
  }

  private flushEvents(): void {
    const { config, events, drain } = this.ctx;
    if (drain.current.apiDownSince !== undefined || this.pendingEvents.length === 0) return;
    const batch = this.pendingEvents.splice(0);
    for (const { type, reason, message } of batch) {
      // Best effort and not awaited: reporting must never hold up the handover itself.
      void events.record({ kind: 'Node', name: config.nodeName }, type, reason, message);
      void events.record(
        {
          kind: 'Pod',
          name: config.podName,
          namespace: config.podNamespace,
          ...(config.podUid ? { uid: config.podUid } : {}),
        },
        type,
        reason,
        message,
      );
    }
  }

  private async publishStatus(): Promise<void> {
    const { ctx } = this;
    const status = JSON.stringify(statusOf(this.mem, ctx.config.observeOnly));
    if (status === this.writtenStatus || ctx.drain.current.apiDownSince !== undefined) return;
    const onNode = this.currentNode()?.metadata?.annotations?.[STATUS_ANNOTATION];
    if (onNode === status) {
      this.writtenStatus = status;
      return;
    }
    // An idle node with no annotation needs none.
    if (onNode === undefined && this.mem.phase === 'idle') {
      this.writtenStatus = status;
      return;
    }
    try {
      const node = await ctx.client.patch<Node>(
        `/api/v1/nodes/${ctx.config.nodeName}`,
        { metadata: { annotations: { [STATUS_ANNOTATION]: status } } },
        'merge',
        { retries: 3, timeoutMs: 5_000 },
      );
      if (rv(node) > rv(this.currentNode())) this.patchedNode = node;
      this.writtenStatus = status;
    } catch (e) {
      ctx.log.warn({ err: (e as Error).message }, 'could not write the L2 status annotation; will retry');
    }
  }

  // --- reading the world -----------------------------------------------------------------

  private async readFence(): Promise<FenceSpec | undefined> {
    const { runner } = this.ctx;
    const tables = fenceTablesIn((await runner.run('nft', ['-j', 'list', 'tables'])).stdout);
    const texts: string[] = [];
    for (const family of tables)
      texts.push((await runner.run('nft', ['-j', 'list', 'table', family, FENCE_TABLE])).stdout);
    return parseFence(texts);
  }

  private async readOwnNode(): Promise<Node | undefined> {
    try {
      return await this.ctx.client.get<Node>(`/api/v1/nodes/${this.ctx.config.nodeName}`, {
        retries: 1,
        timeoutMs: 3_000,
      });
    } catch (e) {
      this.ctx.log.warn({ err: (e as Error).message }, 'cannot read the own Node; resuming from nft only');
      return undefined;
    }
  }

  /**
   * Whether ServiceL2Status tells who announces what: true when MetalLB writes it, false when the
   * CRD is missing (< 0.14.4) or installed with nothing usable in it (0.14.4–0.14.5 write objects
   * only with --enable-l2-service-status, and without serviceName): then, as without the CRD, the
   * VIPs are every LoadBalancer Service's and the fence waits the settle time. Undefined: not known.
   */
  private statusMode(): boolean | undefined {
    if (this.crd !== true) return this.crd;
    // Until the list has arrived the synced gate holds every decision.
    if (!this.statusInformer?.hasSynced) return true;
    // Once seen, for good: MetalLB >= 0.14.6 deletes and re-creates objects as VIPs move, so
    // "none right now" mid-handover is not "never written" (that flip once misled a handover).
    for (const o of this.statusInformer.objects.values()) {
      const st = (o as ServiceL2Status).status;
      if (st?.serviceName && st.node) {
        this.sawUsableStatus = true;
        break;
      }
    }
    const usable = this.sawUsableStatus;
    if (usable !== this.lastStatusMode) {
      this.lastStatusMode = usable;
      this.ctx.log.info(
        { mode: usable ? 'servicel2status' : 'services' },
        usable
          ? 'MetalLB writes ServiceL2Status: VIPs and confirmation come from it'
          : 'ServiceL2Status CRD present but nothing usable written (MetalLB 0.14.4–0.14.5 without --enable-l2-service-status): VIPs from LoadBalancer Services, fence after DRAINGUARD_L2_SETTLE_SECONDS',
      );
    }
    return usable;
  }

  private async checkCrd(): Promise<void> {
    const { ctx } = this;
    try {
      const list = await ctx.client.get<{ resources?: { name: string }[] }>('/apis/metallb.io/v1beta1', {
        timeoutMs: 5_000,
      });
      this.crd = (list.resources ?? []).some((r) => r.name === 'servicel2statuses');
    } catch (e) {
      if (isApiError(e, 404)) this.crd = false;
      else {
        ctx.log.warn({ err: (e as Error).message }, 'cannot tell whether MetalLB has ServiceL2Status yet');
        return;
      }
    }
    if (this.crd && !this.statusInformer) {
      this.statusInformer = new Informer(ctx.client, {
        path: this.statusPath,
        log: ctx.log,
        clock: ctx.clock,
        onChange: (_objs, ev) => {
          const st = (ev.object as ServiceL2Status | undefined)?.status;
          this.noteStatusWrites(_objs, ev);
          if (ev.type === 'SYNC') for (const o of _objs.values()) this.refreshService(o as ServiceL2Status);
          else if (st?.node === ctx.config.nodeName && ev.type !== 'DELETED')
            this.refreshService(ev.object as ServiceL2Status);
          this.schedule();
        },
      });
      this.statusInformer.start();
    }
    if (this.crd === false)
      ctx.log.warn(
        'MetalLB ServiceL2Status CRD not found (MetalLB < 0.14.4): handover cannot be confirmed; the fence waits DRAINGUARD_L2_SETTLE_SECONDS instead',
      );
  }

  private noteStatusWrites(objs: ReadonlyMap<string, KubeObject>, ev: { type: string; object?: KubeObject }) {
    const key = (o: KubeObject) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
    const now = this.ctx.clock.now();
    if (ev.type === 'SYNC') {
      // A (re)list: what changed while we were not watching was written after what we knew.
      const first = this.statusWrittenAt.size === 0;
      const seen = new Set<string>();
      for (const o of objs.values()) {
        const k = key(o);
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
      if (ev.type === 'DELETED') this.statusWrittenAt.delete(key(ev.object));
      else
        this.statusWrittenAt.set(key(ev.object), { rv: ev.object.metadata?.resourceVersion ?? '', at: now });
    }
  }

  /** The LoadBalancer IPs of a Service this node announces (cached: they rarely change). */
  private refreshService(o: ServiceL2Status): void {
    const st = o.status;
    if (st?.node !== this.ctx.config.nodeName || !st.serviceName) return;
    const key = `${st.serviceNamespace ?? ''}/${st.serviceName}`;
    if (!this.unreadServices.get(key)) this.readService(key);
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
          this.schedule();
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

  private async refreshAllLbServices(): Promise<void> {
    try {
      const list = await this.ctx.client.get<KubeList<Service>>('/api/v1/services', WIDE_READ);
      const lbs = (list.items ?? []).filter((s) => s.spec?.type === 'LoadBalancer' && lbIPs(s).length > 0);
      const key = (s: Service) => `${s.metadata?.namespace}/${s.metadata?.name}`;
      for (const s of lbs) this.noteTrafficPolicy(key(s), s);
      this.allLbServices = lbs.map((s) => ({ service: key(s), ips: lbIPs(s).sort() }));
    } catch (e) {
      this.ctx.log.warn({ err: (e as Error).message }, 'cannot list LoadBalancer Services');
    }
  }

  private noteTrafficPolicy(key: string, svc: Service): void {
    if (svc.spec?.externalTrafficPolicy === 'Local') this.localServices.add(key);
    else this.localServices.delete(key);
  }

  /**
   * Reads wide, only around a handover: the Nodes, the speaker pods, MetalLB's pools and
   * L2Advertisements, and the EndpointSlices of the Local services announced here (by the
   * service-name label) — then who could take each service over.
   */
  private async refreshCandidates(fresh: boolean): Promise<void> {
    const { ctx } = this;
    if (!fresh && ctx.clock.now() - this.candidatesAt < 2_000 && this.candidates !== undefined) return;
    try {
      const ownerUid = ctx.drain.pod?.metadata?.ownerReferences?.find((o) => o.controller)?.uid;
      const services = [...this.mem.services, ...this.observe().announced];
      const keys = [...new Set(services.map((s) => s.service))];
      const [nodes, pods, metallb, slices] = await Promise.all([
        ctx.client.get<KubeList<Node>>('/api/v1/nodes', WIDE_READ),
        ownerUid
          ? ctx.client.get<KubeList<Pod>>(`/api/v1/namespaces/${ctx.config.podNamespace}/pods`, WIDE_READ)
          : Promise.resolve({ items: [] } as KubeList<Pod>),
        this.readMetalLbConfig(),
        Promise.all(
          keys
            .filter((k) => this.localServices.has(k))
            .map(async (k) => [k, await this.readyNodesOf(k)] as const),
        ),
      ]);
      const candidates = otherCandidates(nodes.items ?? [], pods.items ?? [], ctx.config.nodeName, ownerUid);
      const labels = new Map(
        (nodes.items ?? []).map((n) => [n.metadata?.name ?? '', n.metadata?.labels ?? {}]),
      );
      const ready = new Map(slices);
      const perService: Record<string, string[]> = {};
      for (const s of services) {
        const local = this.localServices.has(s.service);
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
      this.candidates = candidates;
      this.serviceCandidates = perService;
      this.candidatesAt = ctx.clock.now();
    } catch (e) {
      // A handover about to start must not act on an old read (an earlier drain's "nobody else"
      // would refuse the fail-safe; its "node-b" might be gone): unknown, until the API answers.
      const stale = fresh || ctx.clock.now() - this.candidatesAt > 10_000;
      if (stale) {
        this.candidates = undefined;
        this.serviceCandidates = undefined;
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

  /**
   * MetalLB's IPAddressPools and L2Advertisements. Unreadable (no such CRDs before MetalLB 0.13,
   * or no grant): undefined, and L2Advertisement node selectors do not narrow the candidates.
   */
  private async readMetalLbConfig(): Promise<MetalLbConfig | undefined> {
    const base = `/apis/metallb.io/v1beta1/namespaces/${this.ctx.config.metallbNamespace}`;
    try {
      const [pools, ads] = await Promise.all([
        this.ctx.client.get<KubeList<KubeObject>>(`${base}/ipaddresspools`, WIDE_READ),
        this.ctx.client.get<KubeList<KubeObject>>(`${base}/l2advertisements`, WIDE_READ),
      ]);
      return metallbConfigFrom(pools.items ?? [], ads.items ?? []);
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

export const createL2Handover: CapabilityFactory = (ctx) => new L2Handover(ctx);
export default createL2Handover;
