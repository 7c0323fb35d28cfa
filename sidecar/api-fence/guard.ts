// The I/O edge of the stale API server's fence (the rule is core.ts, the nft fence.ts):
// while the node drains, finds the API servers on this node's own addresses (the `kubernetes`
// Service's EndpointSlices), asks them for the own Node every PROBE_INTERVAL_MS, and fences one
// that does not answer while the cluster's API does: the reject rule first (no new connection
// lands on it), then every established connection destroyed but the probe's (`ss -K`: its client
// sees a reset and dials again through the Service). An Event on the Node says so, and again when
// it is lifted at the drain's end.
import { RetryGate } from '../../shared/backoff.ts';
import { HEDGE_AFTER_MS } from '../../shared/kube/client.ts';
import type { KubeList } from '../../shared/kube/types.ts';
import { API_FENCE_TABLE } from '../../shared/names.ts';
import { apiFenceTableIn, renderApiUnfence } from '../../shared/net/fence-tables.ts';
import { ownNode } from '../events.ts';
import type { FeatureContext } from '../feature.ts';
import { type Metrics, registerMetrics } from '../metrics.ts';
import {
  type ApiEndpointSlice,
  apiEndpointsOf,
  decideApiFence,
  etcdGoneLongEnough,
  etcdGoneWhileSilent,
  fenceWanted,
  LOCAL_ETCD_CLIENT_PORT,
  LOCAL_READ_MAX_MS,
  type LocalEtcdCheck,
  type LocalEtcdView,
  NO_LOCAL_ETCD,
  nextLocalEtcd,
  OTHER_READ_TIMEOUT_MS,
  type ProbeResult,
  probeDue,
  type StaleApiObservation,
  silentWhileOthersAnswer,
} from './core.ts';
import { fencedMessage, unfencedMessage } from './event-messages.ts';
import {
  type ApiEndpoint,
  endpointsKey,
  endpointText,
  killArgs,
  killedCount,
  parseApiFence,
  renderApiFence,
} from './fence.ts';
import {
  etcdCheckDue,
  etcdGoneText,
  type PendingRead,
  readResult,
  supersedes,
  waitsOnOthers,
} from './local-probe.ts';
import { STALE_API_EVENT_REASONS, STALE_API_METRICS } from './reporting.ts';
import { ApiServerClients } from './server-clients.ts';

/** What the guard needs of the node (a fake in unit tests: the ToolRunner's tools). */
export interface StaleApiHost {
  ownAddresses(): Promise<string[] | undefined>;
  /** Whether a socket of this node listens on the etcd client port (LOCAL_ETCD_CLIENT_PORT). */
  localEtcd(): Promise<LocalEtcdCheck>;
}

export class StaleApiGuard {
  private readonly ctx: FeatureContext;
  private readonly host: StaleApiHost;
  private readonly metrics: Metrics<typeof STALE_API_METRICS>;
  private readonly abort = new AbortController();
  private endpoints: ApiEndpoint[] = [];
  private others: ApiEndpoint[] = [];
  private installed: ApiEndpoint[] | undefined;
  private probe: ProbeResult | undefined;
  private lastProbeAt = Number.NEGATIVE_INFINITY;
  /** The local reads in flight. */
  private readonly pending = new Set<PendingRead>();
  /** When an API server on another host last answered the probe's read. */
  private othersAnsweredAt: number | undefined;
  private othersRound: Promise<boolean> | undefined;
  /** The latest read of the `kubernetes` endpoints, settled once it is done (or failed). */
  private endpointsRead: Promise<void> = Promise.resolve();
  /** The local etcd member's port, as the checks saw it. */
  private etcd: LocalEtcdView = NO_LOCAL_ETCD;
  private etcdChecking = false;
  private lastEtcdCheckAt = Number.NEGATIVE_INFINITY;
  /** Clients of the local API servers and of those on other hosts, by endpoint. */
  private readonly clients: ApiServerClients;
  private wasWanted = false;
  private acting = false;
  private loop: Promise<void> | undefined;
  private lastReadEndpoints = Number.NEGATIVE_INFINITY;
  /** When the probe kept (`probe`) became known: its read judged, answered or failed. */
  private probeKnownAt: number | undefined;
  /** A read of the `kubernetes` endpoints has succeeded. */
  private endpointsKnown = false;
  /** After a failed nft or ss call: not again before a capped backoff (no busy loop of execs). */
  private readonly retryGate: RetryGate;

  constructor(ctx: FeatureContext, host: StaleApiHost) {
    this.ctx = ctx;
    this.host = host;
    this.metrics = registerMetrics(ctx.metrics, STALE_API_METRICS);
    this.clients = new ApiServerClients(ctx.client, ctx.config.nodeName);
    this.retryGate = new RetryGate(() => ctx.clock.now(), { baseMs: 500, capMs: 10_000 });
  }

  /** The fence as last read back or installed (tests, status). */
  get fenced(): ApiEndpoint[] | undefined {
    return this.installed;
  }

  /** The API servers found on this node (tests). */
  get localEndpoints(): ApiEndpoint[] {
    return this.endpoints;
  }

  /** Reads back what a previous container left; then runs on its own ticks. Never waits on the API. */
  async start(): Promise<void> {
    this.installed = await this.readFence().catch((e: unknown) => {
      this.ctx.log.error({ err: (e as Error).message }, `cannot read the nft table ${API_FENCE_TABLE}`);
      return undefined;
    });
    this.metrics.fenced.set({}, this.installed ? 1 : 0);
    this.rereadEndpoints();
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
    this.clients.close();
  }

  private wanted(): boolean {
    return fenceWanted(this.ctx.drain.nodeDraining, this.ctx.drain.current.terminating);
  }

  private observation(): StaleApiObservation {
    return {
      now: this.ctx.clock.now(),
      wanted: this.wanted(),
      enabled: this.ctx.config.fenceStaleApiServer,
      endpoints: this.endpoints,
      others: this.others,
      probe: this.probe,
      installed: this.installed,
    };
  }

  private async run(): Promise<void> {
    const { clock } = this.ctx;
    while (!this.abort.signal.aborted) {
      const wanted = this.wanted();
      // A drain begins: the `kubernetes` endpoints read again (once the member is gone the healthy
      // servers drop this node's address within ~15 s, so they are read now, not then).
      if (wanted && !this.wasWanted) {
        this.probe = undefined;
        this.rereadEndpoints();
      }
      // A read sent in an earlier drain says nothing about this one.
      if (wanted !== this.wasWanted) this.dropPending();
      // Every 10 min; every 10 s until a read has succeeded (one failed at start under load).
      const every = this.endpointsKnown ? 10 * 60_000 : 10_000;
      if (!wanted && this.installed === undefined && clock.now() - this.lastReadEndpoints > every)
        this.rereadEndpoints();
      this.wasWanted = wanted;
      const o = this.observation();
      this.checkEtcdIfDue(o);
      if (probeDue(o, this.lastProbeAt)) {
        this.lastProbeAt = o.now;
        for (const e of this.endpoints) void this.probeOnce(e, o.now);
      }
      this.judgePending(o.now);
      await this.act(o);
      await clock.sleep(100, this.abort.signal);
    }
  }

  /**
   * The local etcd member's port: on every tick while a probe may prove this node's API server
   * stale (the kernel's listening sockets read, no connection made: etcd would log each one), once a
   * minute otherwise, only where an API server runs.
   */
  private checkEtcdIfDue(o: StaleApiObservation): void {
    if (this.etcdChecking || !etcdCheckDue(o, this.lastEtcdCheckAt)) return;
    this.etcdChecking = true;
    this.lastEtcdCheckAt = o.now;
    void this.host
      .localEtcd()
      .catch((): LocalEtcdCheck => 'unknown')
      .then((check) => {
        const was = this.etcd;
        this.etcd = nextLocalEtcd(was, check, this.ctx.clock.now());
        if (!was.seenListening && this.etcd.seenListening)
          this.ctx.log.info(
            { port: LOCAL_ETCD_CLIENT_PORT },
            'an etcd member listens on this node: if it exits while the node drains, the API server here is judged stale without waiting for the others',
          );
        if (was.goneSince === undefined && this.etcd.goneSince !== undefined)
          this.ctx.log.warn(
            { port: LOCAL_ETCD_CLIENT_PORT },
            'the etcd member on this node no longer listens',
          );
      })
      .finally(() => {
        this.etcdChecking = false;
      });
  }

  private rereadEndpoints(): void {
    this.endpointsRead = this.readEndpoints().catch((e: unknown) => {
      this.ctx.log.warn({ err: (e as Error).message }, "cannot read this node's addresses");
    });
  }

  /** The API servers on this node's addresses; a failure keeps what was known. */
  private async readEndpoints(): Promise<void> {
    this.lastReadEndpoints = this.ctx.clock.now();
    const own = await this.host.ownAddresses();
    if (!own) return;
    const q = `labelSelector=${encodeURIComponent('kubernetes.io/service-name=kubernetes')}`;
    const get = (v: string) =>
      this.ctx.client.get<KubeList<ApiEndpointSlice>>(
        `/apis/discovery.k8s.io/${v}/namespaces/default/endpointslices?${q}`,
        { timeoutMs: 3_000, hedgeAfterMs: HEDGE_AFTER_MS, signal: this.abort.signal },
      );
    try {
      const list = await get('v1').catch((e: unknown) => {
        if ((e as { code?: number }).code === 404) return get('v1beta1');
        throw e;
      });
      const { local: found, others } = apiEndpointsOf(list.items ?? [], own);
      // Read after the member went, this node's address may be gone from them already: keep it.
      if (found.length === 0 && this.endpoints.length > 0 && this.wanted()) return;
      if (
        found.length > 0 &&
        others.length === 0 &&
        (this.others.length > 0 || endpointsKey(found) !== endpointsKey(this.endpoints))
      )
        this.ctx.log.info(
          { endpoints: found.map(endpointText) },
          "no API server on another host: the one on this node is never fenced as stale (it is the cluster's only one)",
        );
      this.others = others;
      if (endpointsKey(found) !== endpointsKey(this.endpoints))
        this.ctx.log.info(
          { endpoints: found.map(endpointText) },
          found.length > 0
            ? 'an API server runs on this node: it is fenced if it goes stale while the node drains'
            : 'no API server on this node',
        );
      this.endpoints = found;
      this.endpointsKnown = true;
    } catch (e) {
      this.ctx.log.warn(
        { err: (e as Error).message },
        "cannot read the `kubernetes` Service's EndpointSlices: keeping what was known of this node's API servers",
      );
    }
  }

  /**
   * While a local read is CLUSTER_READ_AFTER_MS late, the same read goes to the API servers on other
   * hosts directly (not through the `kubernetes` Service, which may bring it back to this server;
   * one request at a time, again on each tick until one answers); and a pending local read that
   * silentWhileOthersAnswer proves stale is judged at once.
   */
  private judgePending(now: number): void {
    for (const p of this.pending)
      if (p.othersAnsweredAt === undefined && this.othersAnsweredSince(p.sentAt))
        p.othersAnsweredAt = this.othersAnsweredAt;
    // Asked again only for a late read that no answer of theirs has followed yet.
    if ([...this.pending].some((p) => waitsOnOthers(p, now))) void this.askOthers();
    for (const p of this.pending)
      if (etcdGoneWhileSilent(now, p.sentAt, this.etcd)) {
        p.judgedAt = now;
        p.etcdGone = true;
        p.stop.abort();
      } else if (silentWhileOthersAnswer(now, p.sentAt, p.othersAnsweredAt)) {
        p.judgedAt = now;
        p.stop.abort();
      }
  }

  /** Whether another API server answered the probe's read at or after `t`. */
  private othersAnsweredSince(t: number): boolean {
    return this.othersAnsweredAt !== undefined && this.othersAnsweredAt >= t;
  }

  /** Stops the local reads in flight; they count as no probe. */
  private dropPending(): void {
    for (const p of this.pending) {
      p.dropped = true;
      p.stop.abort();
    }
  }

  /**
   * The probe's read sent to the API servers on other hosts, one round at a time (a round asked
   * meanwhile shares it): whether one answered; its time kept in othersAnsweredAt.
   */
  private askOthers(): Promise<boolean> {
    this.othersRound ??= this.askOthersRound().finally(() => {
      this.othersRound = undefined;
    });
    return this.othersRound;
  }

  private async askOthersRound(): Promise<boolean> {
    // The others as read at this drain's start, not as read before it: the one asked may have left
    // the `kubernetes` endpoints meanwhile (a control plane scaled down to this node alone), and its
    // answer would prove nothing of this one. That read is bounded (3 s) and usually takes ms.
    await this.endpointsRead;
    if (this.others.length === 0 || this.abort.signal.aborted) return false;
    return Promise.any(
      this.others.map((o) =>
        this.clients.at(o, false).get(`/api/v1/nodes/${this.ctx.config.nodeName}`, {
          timeoutMs: OTHER_READ_TIMEOUT_MS,
          signal: this.abort.signal,
        }),
      ),
    ).then(
      () => {
        this.othersAnsweredAt = this.ctx.clock.now();
        return true;
      },
      () => false,
    );
  }

  /**
   * One consistent read of the own Node from the local server (from loopback: the fence lets that
   * through), held LOCAL_READ_MAX_MS at most; judged earlier by judgePending. A healthy local server
   * answers in milliseconds, so the others are asked only when it may be stale. The newest probe
   * sent wins.
   */
  private async probeOnce(e: ApiEndpoint, sentAt: number): Promise<void> {
    const { ctx } = this;
    const path = `/api/v1/nodes/${ctx.config.nodeName}`;
    const read: PendingRead = { sentAt, stop: new AbortController() };
    this.pending.add(read);
    let err: unknown;
    await this.clients
      .at(e, true)
      .get(path, {
        timeoutMs: LOCAL_READ_MAX_MS,
        signal: AbortSignal.any([this.abort.signal, read.stop.signal]),
      })
      .catch((x: unknown) => {
        err = x;
      });
    this.pending.delete(read);
    if (this.abort.signal.aborted || read.dropped) return;
    const result = readResult(read, path, err, this.etcd);
    // Failed on its own (held LOCAL_READ_MAX_MS, or a 5xx): stale if the local etcd member is gone,
    // or if the others answer now.
    if (read.judgedAt === undefined && result.local === 'no-answer') {
      const now = ctx.clock.now();
      if (etcdGoneLongEnough(now, this.etcd)) {
        result.etcdGone = true;
        result.detail = `${result.detail ?? `GET ${path}: no answer`} ${etcdGoneText(this.etcd, now)}`;
      } else result.clusterAnswered = this.othersAnsweredSince(sentAt) || (await this.askOthers());
    }
    if (this.abort.signal.aborted) return;
    this.metrics.probes.inc({ answer: result.local });
    if (supersedes(result, this.probe)) {
      this.probe = result;
      this.probeKnownAt = ctx.clock.now();
    }
  }

  private async act(o: StaleApiObservation): Promise<void> {
    const d = decideApiFence(o);
    if (!d || this.acting || !this.retryGate.open(d.kind)) return;
    this.acting = true;
    const { ctx } = this;
    const actStart = ctx.clock.now();
    try {
      if (d.kind === 'fence') {
        const text = d.endpoints.map(endpointText).join(', ');
        await ctx.runner.run('nft', ['-f', '-'], {
          input: renderApiFence(d.endpoints),
          mutates: true,
          timeoutMs: 5_000,
        });
        const nftMs = ctx.clock.now() - actStart;
        // After the reject rule: a connection made meanwhile would be missed.
        let closed = 0;
        for (const e of d.endpoints) {
          const r = await ctx.runner.run('ss', killArgs(e), { mutates: true, timeoutMs: 5_000 });
          closed += killedCount(r.stdout);
        }
        this.metrics.closed.inc({}, closed);
        // The reads still held are moot now: no probe after the fence.
        this.dropPending();
        const first = this.installed === undefined;
        this.installed = ctx.runner.observeOnly ? d.endpoints : await this.readFence();
        this.metrics.fenced.set({}, this.installed ? 1 : 0);
        const message = fencedMessage({
          observeOnly: ctx.runner.observeOnly,
          endpoints: text,
          etcdGone: o.probe?.etcdGone,
          why: d.why,
          closed,
        });
        // Where the time went, from the probe's read to the fence (under load, not the decision).
        const sent = o.probe?.at ?? actStart;
        const timing = { probeMs: (this.probeKnownAt ?? actStart) - sent, decidedMs: actStart - sent };
        const fencedMs = ctx.clock.now() - sent;
        ctx.log.warn(
          { endpoints: text, closed, why: d.why, ...timing, nftMs, fencedMs },
          'stale API server on this node: fenced',
        );
        if (first)
          void ctx.events.record(ownNode(ctx.config), 'Warning', STALE_API_EVENT_REASONS.fenced, message);
      } else {
        await ctx.runner.run('nft', ['-f', '-'], {
          input: renderApiUnfence(),
          mutates: true,
          timeoutMs: 5_000,
        });
        const was = (this.installed ?? []).map(endpointText).join(', ');
        this.installed = ctx.runner.observeOnly ? undefined : await this.readFence();
        this.metrics.fenced.set({}, this.installed ? 1 : 0);
        ctx.log.info({ endpoints: was, why: d.why }, 'stale API server fence lifted');
        void ctx.events.record(
          ownNode(ctx.config),
          'Normal',
          STALE_API_EVENT_REASONS.unfenced,
          unfencedMessage(was, d.why),
        );
      }
      this.retryGate.succeeded(d.kind);
    } catch (e) {
      const { waitMs } = this.retryGate.failed(d.kind);
      ctx.log.error(
        { action: d.kind, err: (e as Error).message, retryInMs: waitMs },
        'stale API server fence: action failed; will retry',
      );
    } finally {
      this.acting = false;
    }
  }

  private async readFence(): Promise<ApiEndpoint[] | undefined> {
    const { runner } = this.ctx;
    if (!apiFenceTableIn((await runner.run('nft', ['-j', 'list', 'tables'])).stdout)) return undefined;
    return parseApiFence((await runner.run('nft', ['-j', 'list', 'table', 'inet', API_FENCE_TABLE])).stdout);
  }
}
