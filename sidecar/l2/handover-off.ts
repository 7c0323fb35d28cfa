// The L2 handover turned off, in its place, when it cannot run:
// - the speaker runs with MetalLB's --ignore-exclude-lb (the webhook read its args and set
//   DRAINGUARD_SPEAKER_IGNORES_EXCLUDE_LB), so no speaker leaves the election for the exclude
//   label. A handover could never be confirmed, and the fail-safe's memberlist cut would end with
//   peers re-electing this node into its own fence: a dark VIP;
// - DRAINGUARD_L2_INTERFACES names an interface the fence does not accept (the webhook refuses
//   such names at admission: the pod was not created through it, or predates the rule). The fence
//   would be refused at the drain; refusing the whole environment would stop netfilter and Lease
//   work too, in a crash loop.
// Instead it says why (a Warning Event on the Node and the speaker's Pod, `disabled` in the status
// annotation), takes back what an earlier sidecar of this node left (a fence, a label it added),
// and labels, fences and cuts nothing, whatever the drain.
import { RetryGate } from '../../shared/backoff.ts';
import type { SidecarConfig } from '../../shared/contract.ts';
import type { L2State } from '../../shared/l2-state.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION, LABEL_OWNED_ANNOTATION } from '../../shared/names.ts';
import { badInterfaceNames, INTERFACE_NAME_RULE } from '../../shared/net/interface-name.ts';
import { Coalescer } from '../coalesce.ts';
import { ownNode, ownPod } from '../events.ts';
import type { Feature, FeatureContext, FeatureFactory } from '../feature.ts';
import { type L2Host, NodeHost } from './host.ts';
import { OwnNode } from './own-node.ts';

export const HANDOVER_OFF_REASON = 'L2HandoverOff';
export const HANDOVER_OFF_WHY =
  `the speaker runs with --ignore-exclude-lb (Helm speaker.ignoreExcludeLB): MetalLB ignores the ${EXCLUDE_LABEL} ` +
  'label, so no other node would take this node’s VIPs over and a handover could never be confirmed; ' +
  'nothing is labelled, fenced or cut at a drain, and VIPs move when this speaker stops (memberlist leave). ' +
  'Remove the flag to turn the L2 handover on';

/** Why the L2 handover cannot run with this configuration; undefined when it can. */
export function handoverOffWhy(
  config: Partial<Pick<SidecarConfig, 'speakerIgnoresExcludeLb' | 'l2Interfaces'>>,
): string | undefined {
  if (config.speakerIgnoresExcludeLb) return HANDOVER_OFF_WHY;
  const bad = badInterfaceNames(config.l2Interfaces ?? []);
  if (bad.length === 0) return undefined;
  return (
    `DRAINGUARD_L2_INTERFACES (pod annotation drainguard.io/l2-interfaces) names ${bad.map((n) => JSON.stringify(n)).join(', ')}: ` +
    `accepted are interface names of ${INTERFACE_NAME_RULE}, comma-separated (the webhook refuses other names at admission: ` +
    'this pod was not created through it); the L2 handover is off until it is fixed: nothing is labelled, fenced or cut at a drain, ' +
    'and VIPs move when this speaker stops'
  );
}

export class L2HandoverOff implements Feature {
  readonly name = 'l2-handover';
  private readonly ctx: FeatureContext;
  /** Only to find and remove a fence an earlier sidecar left. */
  private readonly host: Pick<L2Host, 'readFence' | 'applyFence'>;
  private readonly node: OwnNode;
  private readonly status: string;
  private readonly why: string;
  private readonly abort = new AbortController();
  private readonly passes: Coalescer;
  /** After a failed step, not before a backoff (the drain watcher triggers passes often). */
  private readonly retryGate: RetryGate;
  private fenceChecked = false;
  private eventWritten = false;
  private loggedDrain = false;
  private unsubscribe: (() => void) | undefined;
  private retry: Promise<void> | undefined;

  constructor(
    ctx: FeatureContext,
    host: Pick<L2Host, 'readFence' | 'applyFence'> = new NodeHost(ctx.runner, ctx.log),
  ) {
    this.ctx = ctx;
    this.host = host;
    this.why = handoverOffWhy(ctx.config) ?? HANDOVER_OFF_WHY;
    this.node = new OwnNode(ctx);
    const status: L2State = {
      phase: 'idle',
      since: new Date(ctx.clock.now()).toISOString(),
      vips: [],
      services: [],
      handedTo: {},
      fenced: false,
      failsafe: false,
      interfaces: [],
      disabled: this.why,
    };
    this.status = JSON.stringify(status);
    this.retryGate = new RetryGate(() => ctx.clock.now(), { baseMs: 500, capMs: 30_000 });
    this.passes = new Coalescer(
      () => this.pass(),
      () => this.abort.signal.aborted,
    );
  }

  async start(): Promise<void> {
    this.ctx.log.warn({ why: this.why }, 'L2 handover off');
    const unsubscribeDrain = this.ctx.drain.subscribe(() => this.passes.request('drain state changed'));
    const unsubscribeApi = this.ctx.api.subscribe(() => this.passes.request('API health changed'));
    this.unsubscribe = () => {
      unsubscribeDrain();
      unsubscribeApi();
    };
    this.passes.request('started');
  }

  /** Resolves once no pass is running (tests). */
  async idle(): Promise<void> {
    await this.passes.idle();
  }

  async prestop(): Promise<Record<string, unknown>> {
    return { outcome: 'l2-handover-off', why: this.why };
  }

  async stop(): Promise<void> {
    this.abort.abort();
    this.unsubscribe?.();
    await this.passes.idle();
    await this.retry;
  }

  private async pass(): Promise<void> {
    const { ctx } = this;
    const drain = ctx.drain.current;
    if ((drain.draining || drain.terminating) && !this.loggedDrain) {
      ctx.log.warn(
        { drainReason: drain.drainReason, terminating: drain.terminating, why: this.why },
        `node draining, L2 handover off (${ctx.config.speakerIgnoresExcludeLb ? '--ignore-exclude-lb' : 'bad DRAINGUARD_L2_INTERFACES'}): nothing labelled, fenced or cut`,
      );
      this.loggedDrain = true;
    }
    if (!drain.draining && !drain.terminating) this.loggedDrain = false;
    let failed = false;
    const step = async (kind: string, fn: () => Promise<void>) => {
      if (!this.retryGate.open(kind)) {
        failed = true;
        return;
      }
      try {
        await fn();
        this.retryGate.succeeded(kind);
      } catch (e) {
        failed = true;
        const { waitMs } = this.retryGate.failed(kind);
        ctx.log.warn(
          { step: kind, err: (e as Error).message, retryInMs: waitMs },
          'L2 handover off: will retry',
        );
      }
    };
    // A fence an earlier sidecar left (read once: nothing here installs one).
    if (!this.fenceChecked)
      await step('unfence', async () => {
        if (await this.host.readFence()) {
          ctx.log.warn('removing the L2 fence an earlier sidecar left: the handover is off');
          await this.host.applyFence(undefined);
        }
        this.fenceChecked = true;
      });
    // The API's part once the own Node is known and the API answers.
    if (drain.synced && this.ctx.api.up) {
      const annotations = this.node.current()?.metadata?.annotations ?? {};
      if (annotations[LABEL_OWNED_ANNOTATION] === 'true')
        await step('unlabel', async () => {
          ctx.log.warn({ label: EXCLUDE_LABEL }, 'removing the exclude label an earlier sidecar added');
          await this.node.setExcludeLabel(false);
        });
      if (annotations[L2_STATE_ANNOTATION] !== this.status)
        await step('status', () => this.node.writeStatus(this.status));
      if (!this.eventWritten) await this.recordEvent();
    } else failed = failed || !this.eventWritten;
    if (failed) this.retryLater();
  }

  /** Once per process, on the Node and on the speaker's Pod (best effort, as every Event). */
  private async recordEvent(): Promise<void> {
    const { config, events } = this.ctx;
    this.eventWritten = true;
    for (const target of [ownNode(config), ownPod(config)])
      await events.record(target, 'Warning', HANDOVER_OFF_REASON, this.why);
  }

  /** Another pass after a while: nothing else would trigger one while the drain state stays put. */
  private retryLater(): void {
    this.retry ??= this.ctx.clock.sleep(1_000, this.abort.signal).then(() => {
      this.retry = undefined;
      this.passes.request('retry');
    });
  }
}

export const createFeature: FeatureFactory = (ctx) => new L2HandoverOff(ctx);
