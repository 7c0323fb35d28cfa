// Pure drain detection: from the own Node and Pod objects to "draining" and "terminating".
import type { DrainSignal } from '../../shared/contract.ts';
import type { Node, Pod } from '../../shared/kube/types.ts';

const CORDON_TAINT = 'node.kubernetes.io/unschedulable';

/** Whether a taint matches a drain-taint entry: `key:Effect` exactly, `key` with a hard effect. */
export function matchesDrainTaint(taint: { key: string; effect?: string }, entry: string): boolean {
  const [key, effect] = entry.split(':');
  if (taint.key !== key) return false;
  return effect !== undefined ? taint.effect === effect : taint.effect !== 'PreferNoSchedule';
}

/**
 * Why the node counts as draining, or undefined when it does not. With signal `taint` a bare
 * cordon (spec.unschedulable, and the node.kubernetes.io/unschedulable taint that mirrors it) does
 * not count; with `eviction` nothing on the Node does.
 */
export function nodeDrainReason(
  node: Node | undefined,
  drainTaints: readonly string[],
  signal: DrainSignal = 'cordon',
): string | undefined {
  if (!node || signal === 'eviction') return undefined;
  if (signal === 'cordon' && node.spec?.unschedulable) return 'cordoned';
  const taint = node.spec?.taints?.find(
    (t) =>
      !(signal === 'taint' && t.key === CORDON_TAINT) && drainTaints.some((e) => matchesDrainTaint(t, e)),
  );
  return taint ? `taint ${taint.key}:${taint.effect ?? ''}` : undefined;
}

export function podTerminating(pod: Pod | undefined): boolean {
  return Boolean(pod?.metadata?.deletionTimestamp);
}

/**
 * When the kubelet kills the pod's containers, for a SIGTERM (or a pod seen terminating) at `at`:
 * the deletion's grace (metadata.deletionGracePeriodSeconds), else spec.terminationGracePeriodSeconds,
 * else `fallbackSeconds` (the own Pod unknown: the API down since start-up). The deletionTimestamp
 * is used when it falls within that window: a preStop hook has spent part of the grace already.
 * One outside it is another clock's (skew) and not trusted.
 */
export function terminationDeadline(pod: Pod | undefined, at: number, fallbackSeconds: number): number {
  const spec = pod?.spec?.terminationGracePeriodSeconds;
  const grace =
    pod?.metadata?.deletionGracePeriodSeconds ?? (typeof spec === 'number' ? spec : fallbackSeconds);
  const latest = at + grace * 1000;
  const deletion = Date.parse(pod?.metadata?.deletionTimestamp ?? '');
  return Number.isFinite(deletion) && deletion >= at && deletion < latest ? deletion : latest;
}

export interface DrainState {
  /** The node is cordoned or carries a drain taint (as last seen through the API). */
  draining: boolean;
  drainReason: string | undefined;
  /** The own pod has a deletionTimestamp, /prestop was called, or SIGTERM arrived. */
  terminating: boolean;
  /** The node and pod have been read at least once, and the Node exists. */
  synced: boolean;
  /**
   * The own pod is gone and another pod has its name (a StatefulSet pod re-created after a force
   * delete): names and identities derived from the pod name are no longer this pod's.
   */
  podReplaced: boolean;
  /**
   * The last preStop hook, taken for a deletion because the own Pod could not be read, was a
   * restart of the guarded container after all: seen restarting in the shared PID namespace (and
   * the node not seen draining since). What a fail-safe fenced for it can be lifted on, the API
   * still down (sidecar/drain/restart-witness.ts).
   */
  hookRestartSeen: boolean;
}

export const initialDrainState: DrainState = {
  draining: false,
  drainReason: undefined,
  terminating: false,
  synced: false,
  podReplaced: false,
  hookRestartSeen: false,
};

export function sameDrainState(a: DrainState, b: DrainState): boolean {
  return (
    a.draining === b.draining &&
    a.drainReason === b.drainReason &&
    a.terminating === b.terminating &&
    a.synced === b.synced &&
    a.podReplaced === b.podReplaced &&
    a.hookRestartSeen === b.hookRestartSeen
  );
}
