// Which link a VIP's route goes out of, from `ip -j route get <vip>`: the link that carries the
// VIP's subnet (on-link), or the default route's.

/** The `dev` of the first route in `ip -j route get` output; undefined when there is none. */
export function routeDevice(json: string): string | undefined {
  try {
    const routes = JSON.parse(json) as { dev?: unknown; type?: unknown }[];
    const r = Array.isArray(routes) ? routes[0] : undefined;
    // A local address (the VIP assigned to this host) routes via lo: nothing to fence there.
    if (!r || typeof r.dev !== 'string' || r.dev === 'lo') return undefined;
    return r.dev;
  } catch {
    return undefined;
  }
}

/** Every address on the node's links, from `ip -j addr show` (the fail-safe fence lets these through). */
export function ownAddresses(json: string): string[] {
  try {
    const links = JSON.parse(json) as { addr_info?: { local?: unknown }[] }[];
    if (!Array.isArray(links)) return [];
    const out = links.flatMap((l) => (l.addr_info ?? []).map((a) => a.local));
    return [...new Set(out.filter((a): a is string => typeof a === 'string' && a !== ''))].sort();
  } catch {
    return [];
  }
}
