import type { Feature } from '../shared/contract.ts';
import type { CapabilityFactory } from './capability.ts';

/** Each capability is loaded only when its feature is enabled (footprint: one sidecar per node). */
export const CAPABILITIES: Partial<Record<Feature, () => Promise<CapabilityFactory>>> = {
  'l2-handover': async () => (await import('./l2/capability.ts')).createCapability,
  'lease-handover': async () => (await import('./lease/capability.ts')).createCapability,
  'netfilter-cleanup': async () => (await import('./netfilter/capability.ts')).createCapability,
};
