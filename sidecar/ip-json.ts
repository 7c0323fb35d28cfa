// The node's own addresses and links, read from `ip -j` output: used by the L2 handover (the
// fail-safe fence lets the own addresses through, routes.ts) and by the stale API server's fence
// (which API servers listen on this node).
import type { ToolRunner } from './runner.ts';

/** Links that hold Service IPs, not the node's own addresses; nothing is announced out of them. */
export const SERVICE_IP_LINKS: readonly string[] = ['kube-ipvs0', 'kube-dummy-if'];

/** `ip -j` output as an array of objects; [] for anything else. */
export const parseIpJson = (json: string): Record<string, unknown>[] => {
  try {
    const v = JSON.parse(json) as unknown;
    return Array.isArray(v) ? (v as Record<string, unknown>[]) : [];
  } catch {
    return [];
  }
};

/**
 * The node's own addresses from `ip -j addr show` (the fail-safe fence lets these through): every
 * address of every link but the Service-IP links (kube-ipvs0, kube-dummy-if), and none of `notOwn`
 * (the LoadBalancer VIPs known here, wherever they are bound).
 */
export function ownAddresses(json: string, notOwn: readonly string[] = []): string[] {
  const skip = new Set(notOwn.map((a) => a.toLowerCase()));
  const links = parseIpJson(json) as { ifname?: unknown; addr_info?: { local?: unknown }[] }[];
  const out = links
    .filter((l) => !SERVICE_IP_LINKS.includes(String(l.ifname)))
    .flatMap((l) => (Array.isArray(l.addr_info) ? l.addr_info : []).map((a) => a.local));
  return [
    ...new Set(
      out.filter((a): a is string => typeof a === 'string' && a !== '' && !skip.has(a.toLowerCase())),
    ),
  ].sort();
}

/** The node's own addresses, read now (`ip -j addr show`); undefined when there are none or it fails. */
export async function readOwnAddresses(
  runner: ToolRunner,
  notOwn: readonly string[] = [],
): Promise<string[] | undefined> {
  const own = ownAddresses((await runner.run('ip', ['-j', 'addr', 'show'])).stdout, notOwn);
  return own.length > 0 ? own : undefined;
}
