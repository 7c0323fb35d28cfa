// What the Lease e2e tests set up and read back alike: two routers of one site, and what a
// sidecar's handover reported.
import type { LeaseScene, SidecarProc } from '../../../lab/bed/lease-scene.ts';

/** router-a leading on node a, router-b on node b, both sidecars ready (`sidecarEnv`: their overrides). */
export async function startTwoRouters(
  w: LeaseScene,
  sidecarEnv: Record<string, string> = {},
): Promise<LeaseScene> {
  await w.addPod({ name: 'router-a', node: 'a', sidecar: sidecarEnv });
  await w.waitLeading('router-a');
  await w.addPod({ name: 'router-b', node: 'b', sidecar: sidecarEnv });
  await w.waitSidecarsReady();
  return w;
}

export interface HandoverResult {
  outcome: string;
  successor?: string;
}

/** What the sidecar's Lease handover reported for its (first) Lease; throws with its log when nothing. */
export function handoverResult(sidecar: SidecarProc): HandoverResult {
  const done = sidecar.find((l) => l.msg === 'Lease handover finished');
  const first = (done?.results as HandoverResult[] | undefined)?.[0];
  if (!first) throw new Error(`no handover result in the sidecar log:\n${sidecar.dump()}`);
  return first;
}
