import type { FeatureName, SidecarConfig } from '../shared/contract.ts';
import { badInterfaceNames } from '../shared/net/interface-name.ts';
import type { FeatureFactory } from './feature.ts';

type FeatureConfig = Partial<Pick<SidecarConfig, 'speakerIgnoresExcludeLb' | 'l2Interfaces'>>;

const l2HandoverOff = (config?: FeatureConfig) =>
  config?.speakerIgnoresExcludeLb === true || badInterfaceNames(config?.l2Interfaces ?? []).length > 0;

/** Each feature is loaded only when its feature is enabled (footprint: one sidecar per node). */
export const FEATURE_MODULES: Partial<
  Record<FeatureName, (config?: FeatureConfig) => Promise<FeatureFactory>>
> = {
  // A speaker with --ignore-exclude-lb never leaves the election for the label: no handover could
  // be confirmed, so it does not start; nor with an interface name the fence refuses. What runs
  // instead says why.
  'l2-handover': async (config) =>
    l2HandoverOff(config)
      ? (await import('./l2/handover-off.ts')).createFeature
      : (await import('./l2/feature.ts')).createFeature,
  'lease-handover': async () => (await import('./lease/feature.ts')).createFeature,
  'netfilter-cleanup': async () => (await import('./netfilter/feature.ts')).createFeature,
};

/** A feature switched on with another, under a name of its own. */
export interface Companion {
  name: string;
  createFeature: FeatureFactory;
}

/**
 * Features that run beside another and are switched on with it: the stale API server's fence with
 * the L2 handover (it keeps the speakers off a stale API server while the node drains), not when
 * the handover does not run.
 */
export const COMPANION_MODULES: Partial<
  Record<FeatureName, (config?: FeatureConfig) => Promise<Companion[]>>
> = {
  'l2-handover': async (config) => {
    if (l2HandoverOff(config)) return [];
    const m = await import('./api-fence/feature.ts');
    return [{ name: m.API_FENCE_FEATURE, createFeature: m.createFeature }];
  },
};
