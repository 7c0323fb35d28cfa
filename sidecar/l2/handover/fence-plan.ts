// Which fence a phase asks for, pure: the VIPs to drop and to hold, the links, the memberlist cut,
// and the claim watch (held VIPs answered here until another node claims them on the wire).
// Rendering and reading the nft table back are fence.ts's.
import type { ServiceVips } from '../../../shared/l2-state.ts';
import { type FenceSpec, fenceIsEmpty, normalizeFence } from '../fence.ts';
import type { L2Observation, L2Settings } from './model.ts';
import { vipsOf } from './owners.ts';

export function fenceFor(
  services: ServiceVips[],
  interfaces: string[],
  memberlistPorts: number[],
  ownAddresses?: string[],
  pools?: string[],
): FenceSpec {
  const vips = vipsOf(services);
  return normalizeFence({
    ...byFamily(vips),
    interfaces,
    memberlistPorts,
    ...(pools ? { pools } : ownAddresses ? { ownAddresses } : {}),
  });
}

/** Whether this fence cuts memberlist (the fail-safe's, still on). */
export const cuts = (fence: FenceSpec | undefined) => (fence?.memberlistPorts.length ?? 0) > 0;

/**
 * The memberlist ports a fail-safe fence cuts. None while the pod is going away: its speaker
 * exits once the preStop hook returns (a fail-safe fence settles it) and sends memberlist's
 * `leave` on the way out, which the cut would drop, so peers would wait for failure detection
 * (~5 s) instead (seed 79 trial 20: dark 4.78 s). A stop that is a restart (the new speaker would
 * rejoin memberlist, and peers whose API view lacks the label re-elect it behind the fence) or a
 * drain keeps the cut.
 */
export const failsafeCut = (
  observation: Pick<L2Observation, 'terminating'>,
  settings: Pick<L2Settings, 'memberlistPorts'>,
) => (observation.terminating ? [] : settings.memberlistPorts);

/** The fence with these held VIPs (all when none named) dropped outright instead. */
export function dropOutright(fence: FenceSpec, vips: string[] = fence.held ?? []): FenceSpec {
  const added = byFamily(vips);
  // normalizeFence takes what is dropped outright out of `held`.
  return normalizeFence({
    ...fence,
    vips4: [...fence.vips4, ...added.vips4],
    vips6: [...fence.vips6, ...added.vips6],
    claimed: [],
  });
}

/** VIPs as a fence lists them, by family. */
export function byFamily(vips: readonly string[]): Pick<FenceSpec, 'vips4' | 'vips6'> {
  return { vips4: vips.filter((v) => !v.includes(':')), vips6: vips.filter((v) => v.includes(':')) };
}

/**
 * While the handover awaits its new owners: a fence that drops nothing yet but holds the VIPs
 * announced here, so the kernel silences this node for a VIP the moment its new owner's takeover
 * (gratuitous ARP, unsolicited NA) arrives, before any ServiceL2Status confirms it. This node's
 * own speaker may not see the label at all (its API server stale: the racing order of bench-seed,
 * answered twice 0.25 s until the confirmation). VIPs claimed already stay dropped. Undefined when
 * there is nothing to hold.
 */
export function claimWatch(
  services: ServiceVips[],
  interfaces: string[],
  prior?: FenceSpec,
): FenceSpec | undefined {
  const spec = normalizeFence({
    vips4: prior?.vips4 ?? [],
    vips6: prior?.vips6 ?? [],
    interfaces,
    memberlistPorts: [],
    held: vipsOf(services),
  });
  return fenceIsEmpty(spec) ? undefined : spec;
}

/** The handover's claim watch (not a fail-safe's fence, which cuts memberlist or drops the pools). */
export const isClaimWatch = (fence: FenceSpec | undefined): fence is FenceSpec =>
  fence !== undefined && !cuts(fence) && !fence.pools && !fence.ownAddresses;
