// MetalLB's address pools as the fail-safe fence drops them, pure: each IPAddressPool
// `spec.addresses` entry (CIDR, "first-last" range or single address; IPv4 and IPv6) becomes an
// inclusive range, and overlapping or adjacent ranges merge, because an nft interval set refuses
// overlapping elements. The result is canonical ("first-last", IPv6 in RFC 5952 form, IPv4 before
// IPv6, ascending), so the fence asked for and the fence read back from nft compare equal.
import { isIP } from 'node:net';
import { hexToIpv6, ipv6ToHex } from './fence.ts';

interface Range {
  family: 4 | 6;
  first: bigint;
  last: bigint;
}

const v4ToBig = (a: string) => a.split('.').reduce((n, o) => (n << 8n) | BigInt(Number(o)), 0n);
const bigToV4 = (n: bigint) => [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 255n)).join('.');
const toBig = (a: string) => (isIP(a) === 4 ? v4ToBig(a) : BigInt(ipv6ToHex(a)));
const fromBig = (family: 4 | 6, n: bigint) =>
  family === 4 ? bigToV4(n) : hexToIpv6(`0x${n.toString(16).padStart(32, '0')}`);

/** One pool entry as a range; undefined when malformed (MetalLB refuses such a pool). */
function parseEntry(raw: string): Range | undefined {
  const entry = raw.trim();
  const dash = entry.indexOf('-');
  if (dash > 0) {
    const [from, to] = [entry.slice(0, dash).trim(), entry.slice(dash + 1).trim()];
    const family = isIP(from);
    if ((family !== 4 && family !== 6) || isIP(to) !== family) return undefined;
    const [first, last] = [toBig(from), toBig(to)];
    return first <= last ? { family, first, last } : undefined;
  }
  const [net = '', bitsText] = entry.split('/');
  const family = isIP(net);
  if (family !== 4 && family !== 6) return undefined;
  const width = family === 4 ? 32 : 128;
  const bits = bitsText === undefined ? width : Number(bitsText);
  if (
    !Number.isInteger(bits) ||
    bits < 0 ||
    bits > width ||
    (bitsText !== undefined && !/^\d+$/.test(bitsText))
  )
    return undefined;
  const host = (1n << BigInt(width - bits)) - 1n;
  const first = toBig(net) & ~host & ((1n << BigInt(width)) - 1n);
  return { family, first, last: first | host };
}

/**
 * The pools' address entries as merged, canonical "first-last" ranges (a single address is
 * "a-a"). Malformed entries are left out.
 */
export function poolRanges(entries: readonly string[]): string[] {
  const ranges = entries
    .map(parseEntry)
    .filter((r): r is Range => r !== undefined)
    .sort((a, b) => a.family - b.family || (a.first < b.first ? -1 : a.first > b.first ? 1 : 0));
  const merged: Range[] = [];
  for (const r of ranges) {
    const prev = merged.at(-1);
    if (prev && prev.family === r.family && r.first <= prev.last + 1n) {
      if (r.last > prev.last) prev.last = r.last;
    } else merged.push({ ...r });
  }
  return merged.map((r) => `${fromBig(r.family, r.first)}-${fromBig(r.family, r.last)}`);
}

/**
 * The first address of each merged range (poolRanges' "first-last"), at most `limit` of them: a
 * route lookup for each finds the links MetalLB's pools are reached on.
 */
export function rangeStarts(ranges: readonly string[], limit = 16): string[] {
  return ranges
    .map((r) => r.slice(0, r.indexOf('-')))
    .filter((a) => isIP(a) !== 0)
    .slice(0, limit);
}
