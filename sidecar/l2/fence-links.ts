// Which links the fence goes on, decided from plain data (the host then resolves names and routes:
// host.ts fenceLinks). The promise is "the links of the VIPs and of the default route": a VIP is
// announced on the interfaces its L2Advertisements list, or on every interface when one lists none
// (MetalLB's default, `ipAdvertisementFor`), so interface names restrict the fence only where
// every VIP handed over is restricted — and only by what the ServiceL2Status objects say now.
// Names gathered over the sidecar's life once restricted it for good: one status that named eth1
// (an L2Advertisement since deleted) left eth0 unfenced, and its VIPs answered twice (issue 42).
import type { ServiceVips } from '../../shared/l2-state.ts';

export interface LinkPlanInput {
  /** DRAINGUARD_L2_INTERFACES: the operator's list, taken as every VIP's restriction. */
  configured: readonly string[];
  /**
   * Per service this node's ServiceL2Status names now, its interfaces (empty: every interface);
   * a service missing here (no status now, or no ServiceL2Status at all) counts as every interface.
   */
  statusInterfaces: Readonly<Record<string, readonly string[]>>;
  /** The services the handover covers: remembered, and announced here now. */
  services: readonly ServiceVips[];
  /**
   * The fail-safe is due: route targets it fences whatever is named (the first address of each of
   * MetalLB's pools, 'default'): a speaker cut off from memberlist announces every pool VIP.
   */
  failsafeTargets: readonly string[];
  /**
   * The links of the fence installed now: kept while it is on. A speaker that stops announcing
   * deletes its own ServiceL2Status (and from MetalLB 0.16 the new owner does), so the names
   * vanish mid-handover while a stale speaker may still answer on those links.
   */
  installed: readonly string[];
}

/** What the host resolves (host.ts fenceLinks). */
export interface LinkPlan {
  /** Links by name: fenced where they exist on this node. */
  named: string[];
  /** Route targets whose links are fenced only when none of `named` exists here (or none is named). */
  targets: string[];
  /** Route targets whose links are fenced in any case. */
  always: string[];
  /** Links fenced in any case: the installed fence's. */
  kept: string[];
}

export function fenceLinkPlan(input: LinkPlanInput): LinkPlan {
  const vips = [...new Set(input.services.flatMap((s) => s.ips))].sort();
  const fromStatuses = input.configured.length === 0;
  const listed = fromStatuses
    ? input.services.flatMap((s) => input.statusInterfaces[s.service] ?? [])
    : input.configured;
  // Restricted: every VIP handed over is announced only on listed interfaces.
  const restricted =
    !fromStatuses ||
    (input.services.length > 0 &&
      input.services.every((s) => (input.statusInterfaces[s.service]?.length ?? 0) > 0));
  return {
    named: [...new Set(listed)].sort(),
    targets: vips,
    always: [...new Set([...(restricted ? [] : vips), ...input.failsafeTargets])],
    kept: [...input.installed],
  };
}
