// Pure drain detection: from the own Node and Pod objects to "draining" and "terminating".
import type { Node, Pod } from '../../shared/kube/types.ts';

/** Why the node counts as draining, or undefined when it does not. */
export function nodeDrainReason(node: Node | undefined, drainTaints: readonly string[]): string | undefined {
  if (!node) return undefined;
  if (node.spec?.unschedulable) return 'cordoned';
  const taint = node.spec?.taints?.find((t) => drainTaints.includes(t.key));
  return taint ? `taint ${taint.key}` : undefined;
}

export function podTerminating(pod: Pod | undefined): boolean {
  return Boolean(pod?.metadata?.deletionTimestamp);
}

export interface DrainState {
  /** The node is cordoned or carries a drain taint (as last seen through the API). */
  draining: boolean;
  drainReason: string | undefined;
  /** The own pod has a deletionTimestamp, /prestop was called, or SIGTERM arrived. */
  terminating: boolean;
  /** The node and pod have been read at least once, and the Node exists. */
  synced: boolean;
  /** Epoch ms since which API calls have failed; undefined while the API answers. */
  apiDownSince: number | undefined;
}

export const initialDrainState: DrainState = {
  draining: false,
  drainReason: undefined,
  terminating: false,
  synced: false,
  apiDownSince: undefined,
};

export function sameDrainState(a: DrainState, b: DrainState): boolean {
  return (
    a.draining === b.draining &&
    a.drainReason === b.drainReason &&
    a.terminating === b.terminating &&
    a.synced === b.synced &&
    a.apiDownSince === b.apiDownSince
  );
}
