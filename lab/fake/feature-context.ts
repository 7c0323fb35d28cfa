// A FeatureContext built from fakes, for unit tests that drive a feature's I/O edge: a drain
// state the test sets, a clock the test moves, Events and metrics recorded in memory. The API
// client and the tool runner are the test's own (each feature needs different answers).
import type { Clock } from '../../shared/clock.ts';
import { parseSidecarEnv } from '../../shared/contract-env.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import type { EventRecorder } from '../../shared/kube/events.ts';
import type { Node, Pod } from '../../shared/kube/types.ts';
import { createLogger } from '../../shared/log.ts';
import { Registry } from '../../shared/metrics.ts';
import { ApiHealth } from '../../sidecar/api-health.ts';
import { type DrainState, initialDrainState } from '../../sidecar/drain/state.ts';
import type { DrainWatcher } from '../../sidecar/drain/watcher.ts';
import type { FeatureContext } from '../../sidecar/feature.ts';
import type { ToolRunner } from '../../sidecar/runner.ts';

/**
 * Time moves only when the test moves it. A sleeper wakes only when its signal aborts: loops that
 * tick on a timer stay parked, and the test runs each pass itself (deterministic, no waiting).
 */
export class ManualClock implements Clock {
  private t: number;
  constructor(start: number) {
    this.t = start;
  }
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
  sleep(_ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      signal?.addEventListener('abort', () => resolve(), { once: true });
    });
  }
}

/**
 * Time moves when somebody sleeps (by as long as they sleep) or the test moves `t`: loops that
 * wait between tries run at once, and the time they waited adds up.
 */
export function steppingClock(start = 0): Clock & { t: number } {
  const c = {
    t: start,
    now: () => c.t,
    sleep: async (ms: number) => {
      c.t += ms;
    },
  };
  return c;
}

/** The environment the webhook gives a MetalLB speaker's sidecar on node-a (pod speaker-a). */
export const SPEAKER_ENV = {
  DRAINGUARD_PROFILE: 'metallb-speaker',
  DRAINGUARD_FEATURES: 'l2-handover',
  DRAINGUARD_POD_NAME: 'speaker-a',
  DRAINGUARD_POD_NAMESPACE: 'metallb-system',
  DRAINGUARD_NODE_NAME: 'node-a',
};

/** The drain watcher's face to features: the state, the own Node and Pod, subscriptions. */
export class FakeDrain {
  current: DrainState = { ...initialDrainState, synced: true };
  pod: Pod | undefined;
  /** The own Node as the watch would show it (a getter: the test's API may hold it). */
  readNode: () => Node | undefined = () => undefined;
  private readonly listeners = new Set<(s: DrainState, prev: DrainState) => void>();

  get node(): Node | undefined {
    return this.readNode();
  }
  subscribe(fn: (s: DrainState, prev: DrainState) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
  private readonly nodeListeners = new Set<(node: Node | undefined) => void>();
  subscribeNode(fn: (node: Node | undefined) => void): () => void {
    this.nodeListeners.add(fn);
    return () => this.nodeListeners.delete(fn);
  }
  /** The own Node changed (as the watch would show it): tells its subscribers. */
  nodeChanged(): void {
    for (const l of this.nodeListeners) l(this.node);
  }
  /** Changes the state and tells the subscribers, as the watcher does. */
  set(change: Partial<DrainState>): void {
    const prev = this.current;
    this.current = { ...prev, ...change };
    for (const l of this.listeners) l(this.current, prev);
  }
}

export interface RecordedEvent {
  kind: string;
  type: string;
  reason: string;
  message: string;
}

export function fakeContext(opts: {
  env: Record<string, string>;
  client: KubeClient;
  clock: Clock;
  runner?: ToolRunner;
  drain?: FakeDrain;
}): { ctx: FeatureContext; drain: FakeDrain; api: ApiHealth; events: RecordedEvent[]; metrics: Registry } {
  const drain = opts.drain ?? new FakeDrain();
  // The real one: plain data and the test's clock (result(ok, at) sets an outage's start).
  const api = new ApiHealth({ clock: opts.clock });
  const events: RecordedEvent[] = [];
  const metrics = new Registry();
  const ctx: FeatureContext = {
    config: parseSidecarEnv(opts.env),
    log: createLogger('test', 'silent'),
    client: opts.client,
    events: {
      record: async (object: { kind: string }, type: string, reason: string, message: string) => {
        events.push({ kind: object.kind, type, reason, message });
      },
    } as unknown as EventRecorder,
    runner: opts.runner ?? ({} as ToolRunner),
    drain: drain as unknown as DrainWatcher,
    api,
    metrics,
    clock: opts.clock,
  };
  return { ctx, drain, api, events, metrics };
}
