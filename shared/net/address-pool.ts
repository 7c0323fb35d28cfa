// MetalLB IPAddressPool address entries: CIDRs ("192.0.2.0/24", "2001:db8::/64") and ranges
// ("192.0.2.10-192.0.2.20"), as `spec.addresses` takes them.
import { BlockList, isIP } from 'node:net';

/** Whether `ip` falls within any of `addresses`; malformed entries match nothing. */
export function inAddresses(ip: string, addresses: readonly string[]): boolean {
  const family = isIP(ip);
  if (family === 0) return false;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  const list = new BlockList();
  for (const raw of addresses) {
    const a = raw.trim();
    try {
      const dash = a.indexOf('-');
      if (dash > 0) {
        const [from, to] = [a.slice(0, dash).trim(), a.slice(dash + 1).trim()];
        if (isIP(from) === family && isIP(to) === family) list.addRange(from, to, type);
      } else {
        const [net, bits] = a.split('/');
        if (net && isIP(net) === family)
          list.addSubnet(net, bits === undefined ? (family === 4 ? 32 : 128) : Number(bits), type);
      }
    } catch {
      // An invalid entry (prefix out of range, reversed range): MetalLB refuses the pool.
    }
  }
  return list.check(ip, type);
}
