// The services' VIPs and their owners, pure: which VIPs the services hold, which services a new
// owner has confirmed (its ServiceL2Status), and which could go nowhere.
import type { ServiceVips } from '../../../shared/l2-state.ts';
import type { L2Observation } from './model.ts';

export const vipsOf = (services: ServiceVips[]) => [...new Set(services.flatMap((s) => s.ips))].sort();

export function mergeServices(a: ServiceVips[], b: ServiceVips[]): ServiceVips[] {
  const m = new Map<string, Set<string>>();
  for (const s of [...a, ...b]) {
    const ips = m.get(s.service) ?? new Set<string>();
    for (const ip of s.ips) ips.add(ip);
    m.set(s.service, ips);
  }
  return [...m]
    .map(([service, ips]) => ({ service, ips: [...ips].sort() }))
    .sort((x, y) => x.service.localeCompare(y.service));
}

/**
 * Why the exclude label would strand a VIP: no other node could announce at all, or some service
 * announced here could go nowhere (its own eligibility). Undefined when every one can move.
 */
export function nowhereToGo(services: ServiceVips[], observation: L2Observation): string | undefined {
  const others = observation.otherCandidates ?? [];
  if (others.length === 0)
    return `no other node could announce VIPs ${vipsOf(services).join(', ') || '(none)'}`;
  const stuck = services.filter((s) => (observation.serviceCandidates?.[s.service] ?? others).length === 0);
  if (stuck.length === 0) return undefined;
  return `no other node could announce ${stuck.map((s) => `${s.service} (${s.ips.join(', ')})`).join(', ')} (MetalLB's eligibility per service: a Ready speaker, selected by an L2Advertisement of its pool, a ready endpoint for externalTrafficPolicy: Local)`;
}

export function confirmations(services: ServiceVips[], observation: L2Observation): Record<string, string> {
  const out: Record<string, string> = {};
  for (const s of services) {
    const owner = observation.newOwners[s.service];
    if (owner && owner !== '') out[s.service] = owner;
  }
  return out;
}

export function handedSummary(services: ServiceVips[], handedTo: Record<string, string>): string {
  const byNode = new Map<string, string[]>();
  for (const s of services) {
    const n = handedTo[s.service] ?? '?';
    byNode.set(n, [...(byNode.get(n) ?? []), ...s.ips]);
  }
  return [...byNode]
    .map(([n, ips]) => `VIP${ips.length === 1 ? '' : 's'} ${ips.join(', ')} handed to ${n}`)
    .join('; ');
}
