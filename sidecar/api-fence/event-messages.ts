// The messages of the Events the stale API server's fence records on the own Node when it goes on
// and off (guard.ts records them; their reasons are in reporting.ts).

/** The Warning Event's message when the fence goes on. */
export function fencedMessage(o: {
  observeOnly: boolean;
  /** The fenced endpoints, as text. */
  endpoints: string;
  /** Proven stale by the local etcd member's exit, not by the others' answer. */
  etcdGone: boolean | undefined;
  why: string;
  /** The connections closed. */
  closed: number;
}): string {
  const { closed } = o;
  const cause = o.etcdGone
    ? 'while the etcd member on this node no longer listens'
    : "while the cluster's API does";
  return `${o.observeOnly ? 'observe-only, would have: ' : ''}the API server on this node (${o.endpoints}) does not answer a consistent read ${cause} (${o.why}): its etcd member is likely gone. Refusing connections to it and closing the ${closed} open one${closed === 1 ? '' : 's'}, so that their clients (MetalLB's speakers among them) read through an up-to-date API server; until the drain ends`;
}

/** The Normal Event's message when the fence is lifted. */
export const unfencedMessage = (was: string, why: string): string =>
  `fence of the API server on this node (${was}) lifted: ${why}`;
