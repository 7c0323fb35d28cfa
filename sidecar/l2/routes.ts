// Which link a VIP's ARP/NDP goes out of, read from `ip -j` output (the node's own addresses:
// ../ip-json.ts). kube-proxy in IPVS mode binds every Service IP, LoadBalancer VIPs included, on the dummy
// `kube-ipvs0` (kube-router on `kube-dummy-if`): the VIP is then a local address, `ip route get`
// answers `local … dev lo`, and the link that carries the VIP's subnet is found in the main table.
import { BlockList, isIPv4, isIPv6 } from 'node:net';
import { parseIpJson as parseArray, SERVICE_IP_LINKS } from '../ip-json.ts';
import { isMacAddress } from './fence.ts';

const usable = (dev: unknown): dev is string =>
  typeof dev === 'string' && dev !== 'lo' && !SERVICE_IP_LINKS.includes(dev);

/**
 * The `dev` of the first route in `ip -j route get` output; undefined when there is none, and for
 * a local route (the VIP is an address of this node: `dev lo`), which localRoute() tells apart.
 */
export function routeDevice(json: string): string | undefined {
  const r = parseArray(json)[0];
  return r && r.type !== 'local' && usable(r.dev) ? r.dev : undefined;
}

/** Whether `ip -j route get` says the address is local (bound on this node, e.g. on kube-ipvs0). */
export function localRoute(json: string): boolean {
  const r = parseArray(json)[0];
  return r !== undefined && (r.type === 'local' || r.dev === 'lo');
}

/**
 * The link that carries `vip`'s subnet in `ip -j route show table main` output (one family), else
 * the default route's: the longest prefix that holds it, the lowest metric among equals. Routes
 * out of lo or a Service-IP link, and anything but unicast routes, are skipped.
 */
export function subnetLink(vip: string, mainTableJson: string): string | undefined {
  const family = isIPv4(vip) ? 'ipv4' : isIPv6(vip) ? 'ipv6' : undefined;
  if (!family) return undefined;
  let best: { bits: number; metric: number; dev: string } | undefined;
  for (const r of parseArray(mainTableJson)) {
    if (!usable(r.dev) || (r.type !== undefined && r.type !== 'unicast')) continue;
    const bits = prefixHolding(vip, family, r.dst);
    if (bits === undefined) continue;
    const metric = typeof r.metric === 'number' ? r.metric : 0;
    if (!best || bits > best.bits || (bits === best.bits && metric < best.metric))
      best = { bits, metric, dev: r.dev };
  }
  return best?.dev;
}

/** The prefix length of route destination `dst` ('default', an address, or a CIDR) when it holds `vip`. */
function prefixHolding(vip: string, family: 'ipv4' | 'ipv6', dst: unknown): number | undefined {
  if (dst === 'default') return 0;
  if (typeof dst !== 'string') return undefined;
  const [net = '', len] = dst.split('/');
  const bits = len === undefined ? (family === 'ipv4' ? 32 : 128) : Number(len);
  if ((family === 'ipv4' ? !isIPv4(net) : !isIPv6(net)) || !Number.isInteger(bits)) return undefined;
  const list = new BlockList();
  try {
    list.addSubnet(net, bits, family);
  } catch {
    return undefined;
  }
  return list.check(vip, family) ? bits : undefined;
}

/** The link-layer addresses of these links (`ip -j link show`), those that have one. */
export function linkAddresses(json: string, names: readonly string[]): string[] {
  return parseArray(json)
    .filter((l) => typeof l.ifname === 'string' && names.includes(l.ifname))
    .map((l) => l.address)
    .filter((a): a is string => typeof a === 'string' && isMacAddress(a));
}

/** The names of the node's links, from `ip -j link show`. */
export function linkNames(json: string): string[] {
  return parseArray(json)
    .map((l) => l.ifname)
    .filter((n): n is string => typeof n === 'string');
}
