// MetalLB's layer-2 election as documented (speaker/layer2_controller.go ShouldAnnounce): every
// speaker decides on its own from its own view. Pure, so it can be tested without a network.
import { createHash } from 'node:crypto';
import type { Node } from '../../../shared/kube/types.ts';

export const EXCLUDE_LABEL = 'node.kubernetes.io/exclude-from-external-load-balancers';

/** Nodes MetalLB would let announce: live members, not excluded (any label value), network up. */
export function eligible(nodes: Iterable<Node>, live: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const n of nodes) {
    const name = n.metadata?.name;
    if (!name || !live.has(name)) continue;
    if (n.metadata?.labels && EXCLUDE_LABEL in n.metadata.labels) continue;
    if (n.status?.conditions?.some((c) => c.type === 'NetworkUnavailable' && c.status === 'True')) continue;
    out.push(name);
  }
  return out;
}

/** The announcing node for a VIP: candidates ordered by sha256(node + "#" + VIP), first wins. */
export function owner(candidates: readonly string[], vip: string): string | undefined {
  const key = (n: string) => createHash('sha256').update(`${n}#${vip}`).digest('hex');
  return [...candidates].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0))[0];
}

export interface MemberView {
  lastSeen: Map<string, number>;
  left: Set<string>;
}

/** memberlist-like liveness: alive (and suspect) until deadMs without a heartbeat, or after leave. */
export function liveMembers(self: string, view: MemberView, now: number, deadMs: number): Set<string> {
  const live = new Set<string>([self]);
  for (const [n, t] of view.lastSeen) if (!view.left.has(n) && now - t < deadMs) live.add(n);
  return live;
}
