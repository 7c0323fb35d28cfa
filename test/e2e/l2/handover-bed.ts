// The L2 handover bed shared by handover.test.ts and handover-faults.test.ts (two files, so that
// neither comes near tap's per-file timeout): the scene of three speaker simulators on the wire with
// a drainguard sidecar in each node namespace, and the reads and waits both files' tests use.
import type { Test } from 'tap';
import { createL2Scene, type L2Scene } from '../../../lab/bed/l2-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeObject } from '../../../shared/kube/types.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION } from '../../../shared/names.ts';
import { SPEAKER_CATCH_UP_MAX_MS } from '../../../sidecar/l2/handover/index.ts';

export const T = { timeoutMs: 20_000, intervalMs: 50 };
/** The ARP probe's interval: every no-answer round is 50 ms of a dark VIP. */
export const ROUND_MS = 50;

export interface HandoverBed {
  readonly w: L2Scene;
  readonly names: string[];
  status(n: string): Promise<{
    phase?: string;
    vips?: string[];
    handedTo?: Record<string, string>;
    failsafe?: boolean;
    gaveUp?: boolean;
  }>;
  arpRules(n: string): Promise<number>;
  hasFenceTable(n: string): Promise<boolean>;
  answeredOnlyBy(n: string, vip?: string): Promise<void>;
  events(reason: string): Promise<string[]>;
  /**
   * Back to the start: uncordoned, no label, no fence, the initial owner answering. After an API
   * outage the label stays up to twice the outage (≤ SPEAKER_CATCH_UP_MAX_MS) once it is back, so
   * the speakers catch up first: the deadline covers that hold (CI of 90d5d49: node-a not idle
   * 20 s after an API restart on a loaded machine).
   */
  settleIdle(timeoutMs?: number): Promise<void>;
}

/** The bed for one test file: started in t.before, destroyed in t.teardown. */
export function handoverBed(t: Test): HandoverBed {
  let scene: L2Scene | undefined;
  let nodeNames: string[] = [];
  const w = () => {
    if (!scene) throw new Error('the L2 scene is not started yet');
    return scene;
  };
  const bed: HandoverBed = {
    get w() {
      return w();
    },
    get names() {
      return nodeNames;
    },
    status: async (n) =>
      JSON.parse((await w().getNode(n)).metadata?.annotations?.[L2_STATE_ANNOTATION] ?? '{}'),
    arpRules: async (n) => {
      const r = await w().bed.node(n).exec(['nft', 'list', 'ruleset']);
      return (r.stdout.match(/arp saddr ip @vip4/g) ?? []).length;
    },
    hasFenceTable: async (n) =>
      (await w().bed.node(n).exec(['nft', 'list', 'table', 'netdev', 'drainguard'])).code === 0,
    answeredOnlyBy: (n, vip = w().vip) => w().answeredOnlyBy(n, vip),
    events: async (reason) => {
      const list = await w().client.get<{ items: (KubeObject & { reason?: string; message?: string })[] }>(
        '/api/v1/namespaces/default/events',
      );
      return list.items.filter((e) => e.reason === reason).map((e) => e.message ?? '');
    },
    settleIdle: async (timeoutMs = SPEAKER_CATCH_UP_MAX_MS + T.timeoutMs) => {
      for (const n of nodeNames) {
        await w().cordon(n, false);
        await waitFor(
          `${n} back to idle`,
          async () => {
            const node = await w().getNode(n);
            return !(EXCLUDE_LABEL in (node.metadata?.labels ?? {})) && !(await bed.hasFenceTable(n));
          },
          { ...T, timeoutMs },
        );
      }
      await bed.answeredOnlyBy(w().initialOwner);
      await waitFor(
        'only the initial owner has a ServiceL2Status',
        async () => {
          const st = await w().l2Statuses();
          return st.length === 1 && st[0]?.node === w().initialOwner;
        },
        T,
      );
    },
  };
  t.before(async () => {
    scene = await createL2Scene();
    nodeNames = scene.nodes.map((n) => n.name);
    await scene.startAll();
    await bed.answeredOnlyBy(scene.initialOwner);
  });
  t.teardown(async () => {
    await scene?.destroy();
  });
  return bed;
}
