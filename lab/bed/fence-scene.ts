// What the fence e2e files share: sidecars started once the owner's ServiceL2Status exists, and
// reads of a node's fence, status annotation and Events.

import { waitFor } from '../../shared/clock.ts';
import type { KubeObject } from '../../shared/kube/types.ts';
import { type L2State, parseL2State } from '../../shared/l2-state.ts';
import { L2_STATE_ANNOTATION } from '../../shared/names.ts';
import { type FenceSpec, parseFence } from '../../sidecar/l2/fence.ts';
import type { L2Scene } from './l2-scene.ts';
import { START_DEADLINE_MS } from './proc.ts';

/**
 * A speaker on every node, then — once the owner's ServiceL2Status is written — a sidecar on
 * every node: a sidecar that has seen none treats MetalLB as one that writes none (0.14.4–0.14.5)
 * and fences only after the settle time (10 s), which once ran a test past its deadline.
 */
export async function startSpeakersThenSidecars(w: L2Scene): Promise<void> {
  for (const n of w.nodes) await w.startSpeaker(n.name);
  await waitFor(
    'the owner announces and writes its ServiceL2Status',
    async () => (await w.l2Statuses()).some((s) => s.node === w.initialOwner),
    { timeoutMs: START_DEADLINE_MS, intervalMs: 100 },
  );
  for (const n of w.nodes) await w.startSidecar(n.name);
}

/** The netdev fence on `node` now, read back from nft; undefined when there is none. */
export async function netdevFence(w: L2Scene, node: string): Promise<FenceSpec | undefined> {
  const r = await w.bed.node(node).exec(['nft', '-j', 'list', 'table', 'netdev', 'drainguard']);
  return r.code === 0 ? parseFence([r.stdout]) : undefined;
}

/** Waits until `node`'s status annotation says `phase` (default fenced), and returns it. */
export function statusIn(
  w: L2Scene,
  node: string,
  phase: L2State['phase'] = 'fenced',
  timeoutMs = 20_000,
): Promise<L2State> {
  return waitFor(
    `${node}'s status says ${phase}`,
    async () => {
      const s = parseL2State((await w.getNode(node)).metadata?.annotations?.[L2_STATE_ANNOTATION]);
      return s?.phase === phase ? s : undefined;
    },
    { timeoutMs, intervalMs: 100 },
  );
}

/** The Node Events with this reason (the default namespace's). */
export async function nodeEvents(w: L2Scene, reason: string): Promise<{ type?: string; message: string }[]> {
  const list = await w.client.get<{
    items: (KubeObject & { reason?: string; type?: string; message?: string })[];
  }>('/api/v1/namespaces/default/events');
  return list.items
    .filter((e) => e.reason === reason)
    .map((e) => ({ ...(e.type ? { type: e.type } : {}), message: e.message ?? '' }));
}
