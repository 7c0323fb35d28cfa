// What the L2 handover reads the world through (L2Views: MetalLB, the candidates, the node; fakes
// in unit tests), and the real ones (apiViews).
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
}
/** `changed`: a view changed in a way a reconcile should see now (the reason is logged). */
export type L2ViewsFactory = (ctx: FeatureContext, changed: (reason: string) => void) => L2Views;

/** The real views: the API server and the node's tools. */
export const apiViews: L2ViewsFactory = (ctx, changed) => ({
  metallb: new MetalLbReader(ctx, () => changed('MetalLB view changed')),
  candidates: new CandidateReader(ctx, changed),
  host: new NodeHost(ctx.runner, ctx.log),
});
