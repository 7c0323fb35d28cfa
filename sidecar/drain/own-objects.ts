// What the own Node and Pod say, pure, for the DrainWatcher (watcher.ts): a Node listed behind a
// consistent read, another pod under the own name, the guarded container's restart, and whether a
// preStop hook means the pod goes away.
import type { DrainSignal } from '../../shared/contract.ts';
import type { ContainerStatus, Node, Pod } from '../../shared/kube/types.ts';
import { nodeDrainReason, podTerminating } from './state.ts';

const REPLACED = 'pod re-created under the same name';

/** Whether resourceVersion `a` is after `b` (etcd revisions; anything else: only when different). */
export function newer(a: string, b: string): boolean {
  return /^\d+$/.test(a) && /^\d+$/.test(b) ? BigInt(a) > BigInt(b) : a !== b;
}

/** A pod under the own name whose UID is not the own one. */
export function isOtherPod(pod: Pod | undefined, podUid: string | undefined): boolean {
  const uid = pod?.metadata?.uid;
  return Boolean(podUid && uid && uid !== podUid);
}

/** The guarded container's status in the own Pod (none without a guarded container). */
export function guardedStatusOf(pod: Pod | undefined, name: string | undefined): ContainerStatus | undefined {
  return name ? pod?.status?.containerStatuses?.find((c) => c.name === name) : undefined;
}

/** Restarted since the mark (restartCount went up) and running again. */
export function restartedSince(st: ContainerStatus | undefined, restartsAtMark: number | undefined): boolean {
  return (
    restartsAtMark !== undefined &&
    st?.state?.running !== undefined &&
    (st.restartCount ?? 0) > restartsAtMark
  );
}

/** Whether a preStop hook means the pod is going away, and why (DrainWatcher.goingAway). */
export interface GoingAway {
  going: boolean;
  why: string;
  presumed?: true;
}

/** Going away as last seen (the node drains, the pod is being deleted or was replaced); else undefined. */
export function goingAwayAsSeen(
  node: Node | undefined,
  pod: Pod | undefined,
  replaced: boolean,
  drainTaints: readonly string[],
  drainSignal: DrainSignal | undefined,
): GoingAway | undefined {
  const drained = nodeDrainReason(node, drainTaints, drainSignal);
  if (drained !== undefined) return { going: true, why: drained };
  if (podTerminating(pod)) return { going: true, why: 'pod deleted' };
  if (replaced) return { going: true, why: REPLACED };
  return undefined;
}

/** Going away as the own Pod read fresh says: not deleted, not replaced, the hook was a container restart. */
export function goingAwayAsRead(pod: Pod | undefined, podUid: string | undefined): GoingAway {
  if (isOtherPod(pod, podUid)) return { going: true, why: REPLACED };
  return podTerminating(pod)
    ? { going: true, why: 'pod deleted' }
    : { going: false, why: 'pod not deleted, node not draining (a container restart)' };
}
