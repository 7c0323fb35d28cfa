// The stale API server's fence as a feature of its own (docs/architecture.md): it runs beside the
// L2 handover and is switched on with it (sidecar/features.ts), with its own ticks, metrics and
// Events. Its decisions are core.ts and local-probe.ts, its edge guard.ts, the nft table fence.ts.
import type { FeatureFactory } from '../feature.ts';
import { readOwnAddresses } from '../ip-json.ts';
import { LOCAL_ETCD_CLIENT_PORT } from './core.ts';
import { endpointText } from './fence.ts';
import { StaleApiGuard } from './guard.ts';
import { portListening } from './listening-port.ts';

/** Its name in logs (`feature`) and in the /prestop summary. */
export const API_FENCE_FEATURE = 'api-fence';

export const createFeature: FeatureFactory = (ctx) => {
  const guard = new StaleApiGuard(ctx, {
    ownAddresses: () =>
      readOwnAddresses(ctx.runner).catch((e: unknown) => {
        ctx.log.warn(
          { err: (e as Error).message },
          "cannot read the node's addresses: the API servers on this node stay those known before",
        );
        return undefined;
      }),
    localEtcd: () => portListening(LOCAL_ETCD_CLIENT_PORT),
  });
  return {
    name: API_FENCE_FEATURE,
    // Reads back a fence a previous container left, then runs on its own ticks; never waits on the API.
    start: () => guard.start(),
    // Nothing to finish before the pod goes: a fence stays until the drain ends, lifted by the next
    // sidecar on this node (read back at its start).
    prestop: async () => ({ fenced: (guard.fenced ?? []).map(endpointText) }),
    stop: () => guard.stop(),
  };
};
