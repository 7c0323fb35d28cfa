import type { FeatureName, SidecarConfig } from '../shared/contract.ts';
import { badInterfaceNames } from '../shared/net/interface-name.ts';
import type { FeatureFactory } from './feature.ts';

/** Each feature is loaded only when its feature is enabled (footprint: one sidecar per node). */
export const FEATURE_MODULES: Partial<
  Record<
    FeatureName,
    (
      config?: Partial<Pick<SidecarConfig, 'speakerIgnoresExcludeLb' | 'l2Interfaces'>>,
    ) => Promise<FeatureFactory>
  >
> = {
  // A speaker with --ignore-exclude-lb never leaves the election for the label: no handover could
  // be confirmed, so it does not start; nor with an interface name the fence refuses. What runs
  // instead says why.
  'l2-handover': async (config) =>
    config?.speakerIgnoresExcludeLb || badInterfaceNames(config?.l2Interfaces ?? []).length > 0
      ? (await import('./l2/handover-off.ts')).createFeature
      : (await import('./l2/feature.ts')).createFeature,
  'lease-handover': async () => (await import('./lease/feature.ts')).createFeature,
  'netfilter-cleanup': async () => (await import('./netfilter/feature.ts')).createFeature,
};
