// What the L2 handover reads the world through (L2Views: MetalLB, the candidates, the node, the
// stale API server's guard; fakes in unit tests), and the real ones (apiViews).
import { LOCAL_ETCD_CLIENT_PORT } from '../api-fence/core.ts';
import { StaleApiGuard } from '../api-fence/guard.ts';
import { portListening } from '../api-fence/listening-port.ts';
import type { FeatureContext } from '../feature.ts';
import type { CandidateView } from './candidate-view.ts';
import { CandidateReader } from './candidates.ts';
import { type L2Host, NodeHost } from './host.ts';
import { MetalLbReader, type MetalLbView } from './metallb-view.ts';

/** What the feature reads the world through; `changed` asks for a reconcile. */
export interface L2Views {
  metallb: MetalLbView;
  candidates: CandidateView;
  host: L2Host;
  /** Fences this node's own API server when it goes stale during a drain (none in unit tests). */
  staleApi?: StaleApiGuard;
}
/** `changed`: a view changed in a way a reconcile should see now (the reason is logged). */
export type L2ViewsFactory = (ctx: FeatureContext, changed: (reason: string) => void) => L2Views;

/** The real views: the API server and the node's tools. */
export const apiViews: L2ViewsFactory = (ctx, changed) => {
  const host = new NodeHost(ctx.runner, ctx.log);
  return {
    metallb: new MetalLbReader(ctx, () => changed('MetalLB view changed')),
    candidates: new CandidateReader(ctx, changed),
    host,
    staleApi: new StaleApiGuard(ctx, {
      ownAddresses: () => host.ownAddresses(),
      localEtcd: () => portListening(LOCAL_ETCD_CLIENT_PORT),
    }),
  };
};
