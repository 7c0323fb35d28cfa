import type { Feature, SidecarConfig } from '../shared/contract.ts';
import type { CapabilityFactory } from './capability.ts';

/** Each capability is loaded only when its feature is enabled (footprint: one sidecar per node). */
export const CAPABILITIES: Partial<
  Record<Feature, (config?: Pick<SidecarConfig, 'speakerIgnoresExcludeLb'>) => Promise<CapabilityFactory>>
> = {
  // A speaker with --ignore-exclude-lb never leaves the election for the label: no handover could
  // be confirmed, so it does not start; what runs instead says why.
  'l2-handover': async (config) =>
    config?.speakerIgnoresExcludeLb
      ? (await import('./l2/handover-off.ts')).createCapability
      : (await import('./l2/capability.ts')).createCapability,
  'lease-handover': async () => (await import('./lease/capability.ts')).createCapability,
  'netfilter-cleanup': async () => (await import('./netfilter/capability.ts')).createCapability,
};
