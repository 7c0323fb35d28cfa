// What a DrainWatcher (watcher.ts) is given: its API client, the own Node and Pod's names, what
// counts as a drain, and the guarded container.
import type { Clock } from '../../shared/clock.ts';
import type { DrainSignal } from '../../shared/contract.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import type { Logger } from '../../shared/log.ts';
import type { ApiHealth } from '../api-health.ts';
import type { ProcFs } from './procs.ts';

export interface DrainWatcherOptions {
  client: KubeClient;
  nodeName: string;
  podName: string;
  podNamespace: string;
  drainTaints: readonly string[];
  /** What counts as a drain (default cordon). */
  drainSignal?: DrainSignal;
  log: Logger;
  clock: Clock;
  /** The container a preStop hook guards: its restart ends a terminating state set by that hook. */
  guardedContainer?: string;
  /** The own pod's UID (downward API): a pod of the same name with another UID is not this one. */
  podUid?: string;
  /** Whether the API answers (the sidecar's one owner of it); the watcher's own when not given. */
  api?: ApiHealth;
  /** Where processes are read (tests: a fake /proc). */
  proc?: { dir: string; fs?: ProcFs };
}
