// What the L2 handover's tick loop does besides asking for a reconcile, as named periodic tasks
// (../periodic.ts): probing an API that is down, looking for a stale API server, reading MetalLB's
// statuses consistently, re-reading the fence, the claims and MetalLB's pools.
import type { PeriodicTask } from '../periodic.ts';
import { staleServerCheckDue, statusReadDue } from './handover/index.ts';
import type { ObserverParts } from './observer.ts';

/** MetalLB's address pools are re-read this often outside handovers (the fail-safe uses them). */
export const POOLS_REREAD_MS = 10 * 60_000;

/** What the tasks read through (the observer's parts), and how the feature reads its fence again. */
export type SideTaskParts = Pick<
  ObserverParts,
  'ctx' | 'settings' | 'metallb' | 'candidates' | 'memory' | 'atRestIdle'
> & {
  /** nft read again; a failed read keeps what was known. */
  rereadFence(): Promise<void>;
};

/** The tick loop's tasks besides the reconcile, in the order it runs them. */
export function l2SideTasks(p: SideTaskParts): PeriodicTask[] {
  const { ctx } = p;
  const ownNode = `/api/v1/nodes/${ctx.config.nodeName}`;
  return [
    {
      // While the API is down and it matters (draining, fail-safe), ask it directly every
      // second: informers relist with a backoff of up to 10 s, too slow to notice it is back.
      name: 'api-probe',
      mode: 'background',
      due: (now, last) => {
        const drain = ctx.drain.current;
        return !ctx.api.up && (drain.draining || drain.terminating || !p.atRestIdle()) && now - last >= 1_000;
      },
      run: () => ctx.client.get(ownNode, { timeoutMs: 2_000 }),
    },
    {
      // Awaiting a confirmation longer than the fail-safe's grace (one takes ~1 s), or this
      // node's speaker withdrawn with nobody confirming: the watch it arrives on may sit silent
      // on an API server whose etcd member is gone (and the peers' watches with it). Re-open the
      // watches on new connections and read the own Node consistently, unhedged: a healthy
      // server replays what the watch missed; a stale one fails the read, which counts toward
      // peersMayBeBlind.
      name: 'stale-server-check',
      mode: 'background',
      due: (now, last) => staleServerCheckDue(p.memory(), now, last, p.settings),
      run: () => {
        ctx.api.reopenWatches('no confirmation yet: looking for a stale API server');
        return ctx.client.get(ownNode, { timeoutMs: 3_000 });
      },
    },
    {
      // Awaiting a confirmation while API requests fail: the confirmation may never come on the
      // watch (a stale server), so MetalLB's statuses are read consistently every second.
      name: 'statuses-read',
      mode: 'fire',
      due: (now, last) => statusReadDue(p.memory(), ctx.api.failedAt, now, last, p.settings),
      run: () => p.metallb.readStatusesConsistently(),
    },
    {
      // Someone may have flushed the ruleset, or installed MetalLB's CRD since.
      name: 'fence-and-crd-check',
      mode: 'await',
      due: (now, last) => now - last > 30_000,
      run: async () => {
        await p.rereadFence();
        await p.metallb.checkCrd();
      },
    },
    {
      // VIPs held under the fail-safe: a claim the kernel saw shows in status and Events within 1 s.
      name: 'claims-read',
      mode: 'await',
      due: (now, last) => p.memory().fence?.held !== undefined && now - last >= 1_000,
      run: () => p.rereadFence(),
    },
    {
      name: 'pools-read',
      mode: 'await',
      due: (now, last) => now - last > POOLS_REREAD_MS && ctx.api.up,
      run: async () => p.candidates.readPools?.(),
    },
  ];
}
