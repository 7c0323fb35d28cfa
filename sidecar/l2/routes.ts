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
