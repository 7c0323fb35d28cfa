import type { Clock } from '../shared/clock.ts';
import type { SidecarConfig } from '../shared/contract.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import type { EventRecorder } from '../shared/kube/events.ts';
import type { Logger } from '../shared/log.ts';
import type { Registry } from '../shared/metrics.ts';
import type { ApiHealth } from './api-health.ts';
import type { DrainWatcher } from './drain/watcher.ts';
import type { ToolRunner } from './runner.ts';

/** What every feature gets: shared drain detection, API client and health, tool runner. Nothing else. */
export interface FeatureContext {
  config: SidecarConfig;
  log: Logger;
  client: KubeClient;
  events: EventRecorder;
  runner: ToolRunner;
  drain: DrainWatcher;
  /** Whether the API answers, since when not; re-opens the watches. */
  api: ApiHealth;
  metrics: Registry;
  clock: Clock;
}

export interface Feature {
  readonly name: string;
  start(): Promise<void>;
  /** /prestop and SIGTERM: finish (bounded) what must happen before the pod goes; returns a summary. */
  prestop(): Promise<Record<string, unknown>>;
  /**
   * The preStop hook of a guarded container's restart (the pod stays): finish (bounded) the
   * handover the drain state now asks for. Features without one do nothing then.
   */
  restarting?(): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

/**
 * Every feature module exports its factory as `export const createFeature: FeatureFactory`
 * (and nothing as default): sidecar/features.ts loads each one lazily by that name.
 */
export type FeatureFactory = (ctx: FeatureContext) => Feature;
