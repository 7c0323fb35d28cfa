// The on-the-wire fence, pure: renders the nft transaction and reads the installed state back.
// MetalLB answers ARP from an AF_PACKET socket, which arp/ip output hooks never see; a netdev
// egress hook (Linux >= 5.16) does. NDP goes out through a raw ICMPv6 socket, so an inet output
// hook sees it, but the VIP is the ICMPv6 target (body), matched as raw payload because Debian
// 12's nft 1.0.6 has no `icmpv6 taddr`.
import { isIPv4, isIPv6 } from 'node:net';
import { FENCE_TABLE } from '../../shared/names.ts';
import type { NftItem } from '../../shared/net/fence-tables.ts';
import { INTERFACE_NAME_RULE, isInterfaceName } from '../../shared/net/interface-name.ts';
import { CLAIMED_SET, clearLines, type InstalledFence } from './fence-update.ts';

export interface FenceSpec {
  vips4: string[];
  vips6: string[];
  /** Interfaces whose egress drops ARP from the VIPs. */
  interfaces: string[];
  /** Memberlist ports cut on output (fail-safe only); empty = no cut. */
  memberlistPorts: number[];
  /**
   * Fail-safe: the node's own addresses. When set, the fence drops every ARP whose sender and
   * every NA whose target is NOT one of them, not just the VIPs: a speaker cut off from
   * memberlist hears no peer, believes it is alone and announces every VIP its pools allow.
   */
  ownAddresses?: string[];
  /**
   * Fail-safe with MetalLB's address pools known: inclusive ranges "first-last" (merged, no
   * overlap: sidecar/l2/pool-ranges.ts) whose ARP (sender) and NA (target) are dropped besides the
   * VIPs'. Only what a speaker could announce is dropped: macvlan pods, keepalived or kube-vip
   * VIPs outside the pools keep their ARP. Never together with ownAddresses.
   */
  pools?: string[];
  /**
   * Fail-safe: the VIPs announced here, still answered until another node claims one on the wire
   * (its gratuitous ARP or unsolicited NA for it arrives here: MetalLB sends them on every
   * takeover). The kernel then drops this node's ARP/NA for that VIP at once: an ingress rule adds
   * it to the `claimed` set the egress rules drop. Exempt from the pools' and own addresses' drops.
   * Fencing them with the rest left the VIP dark until memberlist declared this node dead (~5 s:
   * robustness SEED=91 TRIAL=62).
   */
  held?: string[];
  /**
   * Read back only: the held VIPs the kernel saw claimed and now drops. sameFence ignores it; a
   * render keeps them claimed.
   */
  claimed?: string[];
  /**
   * The fenced links' own MAC addresses, added by the host when it renders: a claim must come from
   * another host, not from a frame of this node's own that the network reflects back (a hairpin
   * bridge port, some bond modes). sameFence ignores it.
   */
  ownMacs?: string[];
}

/** An Ethernet address as `ip` prints it (aa:bb:cc:dd:ee:ff, either case). */
export const isMacAddress = (text: string) => /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/i.test(text);

const v4Number = (a: string) => a.split('.').reduce((n, o) => n * 256 + Number(o), 0);
const v4Text = (n: number) => [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');
/** "first-last" of one family, first <= last. */
function isAddressRange(range: string): boolean {
  const [a = '', b = '', extra] = range.split('-');
  if (extra !== undefined) return false;
  if (isIPv4(a) && isIPv4(b)) return v4Number(a) <= v4Number(b);
  return isIPv6(a) && isIPv6(b) && ipv6ToHex(a) <= ipv6ToHex(b);
}
const rangeFamily = (range: string) => (range.includes(':') ? 6 : 4);

/** Rejects anything that could not be spliced safely into an nft script. */
export function validateFence(spec: FenceSpec): string[] {
  const problems: string[] = [];
  for (const v of spec.vips4)
    if (!isIPv4(v)) problems.push(`vips4: ${JSON.stringify(v)} is not an IPv4 address`);
  for (const v of spec.vips6)
    if (!isIPv6(v)) problems.push(`vips6: ${JSON.stringify(v)} is not an IPv6 address`);
  for (const i of spec.interfaces)
    if (!isInterfaceName(i))
      problems.push(`interfaces: ${JSON.stringify(i)} is not an interface name (${INTERFACE_NAME_RULE})`);
  for (const p of spec.memberlistPorts)
    if (!Number.isInteger(p) || p < 1 || p > 65535)
      problems.push(`memberlistPorts: ${p} is not a port 1-65535`);
  for (const a of spec.ownAddresses ?? [])
    if (!isIPv4(a) && !isIPv6(a)) problems.push(`ownAddresses: ${JSON.stringify(a)} is not an IP address`);
  for (const r of spec.pools ?? [])
    if (!isAddressRange(r))
      problems.push(`pools: ${JSON.stringify(r)} is not an address range "first-last" of one family`);
  if (spec.pools && spec.ownAddresses)
    problems.push('pools and ownAddresses: a fail-safe fence uses one of them');
  for (const m of spec.ownMacs ?? [])
    if (!isMacAddress(m)) problems.push(`ownMacs: ${JSON.stringify(m)} is not a MAC address`);
  for (const field of ['held', 'claimed'] as const)
    for (const a of spec[field] ?? [])
      if (!isIPv4(a) && !isIPv6(a)) problems.push(`${field}: ${JSON.stringify(a)} is not an IP address`);
  return problems;
}

/** Canonical, sorted, de-duplicated: two specs that mean the same fence compare equal. */
export function normalizeFence(spec: FenceSpec): FenceSpec {
  const uniq = <T>(xs: T[], cmp?: (a: T, b: T) => number) => [...new Set(xs)].sort(cmp);
  const canon = (a: string) => (isIPv6(a) ? hexToIpv6(ipv6ToHex(a)) : a);
  // Dropping everything foreign covers every VIP: none are listed, so a read-back compares equal.
  const foreign = spec.ownAddresses !== undefined;
  const vips4 = uniq(spec.vips4);
  const vips6 = uniq(spec.vips6.map(canon));
  // A VIP dropped outright is not held as well; a claim counts only for a VIP held.
  const held = uniq((spec.held ?? []).map(canon)).filter((v) => !vips4.includes(v) && !vips6.includes(v));
  const claimed = uniq((spec.claimed ?? []).map(canon)).filter((v) => held.includes(v));
  return {
    vips4: foreign ? [] : vips4,
    vips6: foreign ? [] : vips6,
    interfaces: uniq(spec.interfaces),
    memberlistPorts: uniq(spec.memberlistPorts, (a, b) => a - b),
    ...(spec.ownAddresses ? { ownAddresses: uniq(spec.ownAddresses.map(canon)) } : {}),
    ...(spec.pools ? { pools: uniq(spec.pools.map((r) => r.split('-').map(canon).join('-'))) } : {}),
    ...(held.length > 0 ? { held } : {}),
    ...(claimed.length > 0 ? { claimed } : {}),
    ...(held.length > 0 && spec.ownMacs?.length
      ? { ownMacs: uniq(spec.ownMacs.map((m) => m.toLowerCase())) }
      : {}),
  };
}
const pools4 = (spec: FenceSpec) => (spec.pools ?? []).filter((r) => rangeFamily(r) === 4);
const pools6 = (spec: FenceSpec) => (spec.pools ?? []).filter((r) => rangeFamily(r) === 6);

/** Whether the fence drops everything not sent from the node's own addresses (fail-safe). */
export const fencesForeign = (spec: FenceSpec): boolean => spec.ownAddresses !== undefined;
const own4 = (spec: FenceSpec) => (spec.ownAddresses ?? []).filter((a) => isIPv4(a));
const own6 = (spec: FenceSpec) => (spec.ownAddresses ?? []).filter((a) => isIPv6(a));

const held4 = (spec: FenceSpec) => (spec.held ?? []).filter((a) => isIPv4(a));
const held6 = (spec: FenceSpec) => (spec.held ?? []).filter((a) => isIPv6(a));

/** The same fence, whatever the kernel has seen claimed of its held VIPs since it went on. */
export function sameFence(a: FenceSpec | undefined, b: FenceSpec | undefined): boolean {
  if (!a || !b) return a === b;
  const unclaimed = (s: FenceSpec) =>
    JSON.stringify({ ...normalizeFence(s), claimed: undefined, ownMacs: undefined });
  return unclaimed(a) === unclaimed(b);
}

/** The held VIPs of an installed fence the kernel saw another node claim (and now drops). */
export const claimedVips = (installed: FenceSpec | undefined): string[] =>
  installed ? (normalizeFence(installed).claimed ?? []) : [];

export function fenceIsEmpty(spec: FenceSpec): boolean {
  return (
    (spec.vips4.length === 0 || spec.interfaces.length === 0) &&
    spec.vips6.length === 0 &&
    spec.memberlistPorts.length === 0 &&
    !fencesForeign(spec) &&
    (spec.pools ?? []).length === 0 &&
    (held4(spec).length === 0 || spec.interfaces.length === 0) &&
    held6(spec).length === 0
  );
}

/** 2001:db8::10 -> 0x20010db8000000000000000000000010 (the form a typeof @th,64,128 set takes). */
export function ipv6ToHex(addr: string): string {
  if (!isIPv6(addr)) throw new Error(`not an IPv6 address: ${addr}`);
  let text = addr;
  // An embedded IPv4 tail (::ffff:192.0.2.1) becomes two hextets.
  const v4 = text.match(/(\d+\.\d+\.\d+\.\d+)$/);
  if (v4?.[1]) {
    const o = v4[1].split('.').map(Number) as [number, number, number, number];
    text =
      text.slice(0, -v4[1].length) +
      `${((o[0] << 8) | o[1]).toString(16)}:${((o[2] << 8) | o[3]).toString(16)}`;
  }
  const [head = '', tail] = text.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const fill = tail === undefined ? [] : Array(8 - h.length - t.length).fill('0');
  return `0x${[...h, ...fill, ...t].map((x) => x.padStart(4, '0')).join('')}`;
}

/** The reverse, in RFC 5952 form (longest zero run compressed). */
export function hexToIpv6(hex: string): string {
  const digits = hex.replace(/^0x/i, '').padStart(32, '0');
  if (!/^[0-9a-fA-F]{32}$/.test(digits)) throw new Error(`not a 128-bit hex value: ${hex}`);
  const groups = Array.from({ length: 8 }, (_, i) => Number.parseInt(digits.slice(i * 4, i * 4 + 4), 16));
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hexes = groups.map((g) => g.toString(16));
  if (best < 0) return hexes.join(':');
  return `${hexes.slice(0, best).join(':')}::${hexes.slice(best + bestLen).join(':')}`;
}

/**
 * One `nft -f -` transaction that replaces whatever drainguard had with exactly this fence,
 * so re-running it (after a restart, or with more VIPs) never duplicates a rule. With `installed`
 * (the tables' chains and sets now), a claimed set the new fence keeps is kept, never deleted: a
 * claim the kernel adds while this renders survives it (fence-update.ts).
 */
export function renderFence(input: FenceSpec, installed: InstalledFence = {}): string {
  const problems = validateFence(input);
  if (problems.length > 0) throw new Error(`invalid fence: ${problems.join('; ')}`);
  const spec = normalizeFence(input);
  const foreign = fencesForeign(spec);
  const [p4, p6] = [pools4(spec), pools6(spec)];
  const [h4, h6] = [held4(spec), held6(spec)];
  const claimsKept = (family: 'netdev' | 'inet', held: string[]) =>
    held.length > 0 && installed[family]?.sets.includes(CLAIMED_SET[family]) ? installed[family] : undefined;
  const netdevKept = spec.interfaces.length > 0 ? claimsKept('netdev', h4) : undefined;
  const inetKept = claimsKept('inet', h6);
  const lines = clearLines({
    ...(netdevKept ? { netdev: netdevKept } : {}),
    ...(inetKept ? { inet: inetKept } : {}),
  });
  const claimed = spec.claimed ?? [];
  const macs = spec.ownMacs ?? [];
  const notOwn = macs.length > 0 ? 'ether saddr != @ownmacs ' : '';
  const ownMacSet = () => {
    if (macs.length > 0) lines.push(`  set ownmacs { type ether_addr; elements = { ${macs.join(', ')} } }`);
  };
  const elements = (xs: string[]) => (xs.length > 0 ? ` elements = { ${xs.join(', ')} };` : '');
  if ((spec.vips4.length > 0 || foreign || p4.length > 0 || h4.length > 0) && spec.interfaces.length > 0) {
    lines.push(`table netdev ${FENCE_TABLE} {`);
    if (h4.length > 0) {
      lines.push(`  set held4 { type ipv4_addr; elements = { ${h4.join(', ')} } }`);
      // Filled from the packet path (ingress below); kept across a re-render.
      lines.push(
        `  set claimed4 { type ipv4_addr; flags dynamic;${elements(claimed.filter((a) => isIPv4(a)))} }`,
      );
      ownMacSet();
    }
    if (foreign) {
      // 0.0.0.0: the kernel's own duplicate-address probes.
      lines.push(`  set own4 { type ipv4_addr; elements = { ${['0.0.0.0', ...own4(spec)].join(', ')} } }`);
    } else if (spec.vips4.length > 0)
      lines.push(`  set vip4 { type ipv4_addr; elements = { ${spec.vips4.join(', ')} } }`);
    if (p4.length > 0)
      lines.push(`  set pool4 { type ipv4_addr; flags interval; elements = { ${p4.join(', ')} } }`);
    for (const dev of spec.interfaces) {
      if (h4.length > 0) {
        lines.push(`  chain claims-${dev} {`);
        lines.push(`    type filter hook ingress device "${dev}" priority 0; policy accept;`);
        // Only a node announcing the VIP sends ARP with it as sender (a takeover's gratuitous ARP).
        lines.push(`    ${notOwn}arp saddr ip @held4 add @claimed4 { arp saddr ip } counter`);
        lines.push('  }');
      }
      lines.push(`  chain egress-${dev} {`);
      lines.push(`    type filter hook egress device "${dev}" priority 0; policy accept;`);
      if (h4.length > 0) {
        lines.push('    arp saddr ip @claimed4 counter drop');
        lines.push('    arp saddr ip @held4 accept');
      }
      // Replies and gratuitous ARP (sent by MetalLB as request and reply) all carry the VIP as sender.
      if (foreign) lines.push('    arp saddr ip != @own4 counter drop');
      else if (spec.vips4.length > 0) lines.push('    arp saddr ip @vip4 counter drop');
      if (p4.length > 0) lines.push('    arp saddr ip @pool4 counter drop');
      lines.push('  }');
    }
    lines.push('}');
  }
  if (spec.vips6.length > 0 || spec.memberlistPorts.length > 0 || foreign || p6.length > 0 || h6.length > 0) {
    lines.push(`table inet ${FENCE_TABLE} {`);
    const heldFirst = () => {
      if (h6.length === 0) return;
      lines.push('    icmpv6 type nd-neighbor-advert @th,64,128 @claimed6 counter drop');
      lines.push('    icmpv6 type nd-neighbor-advert @th,64,128 @held6 accept');
    };
    if (h6.length > 0) {
      lines.push(`  set held6 { typeof @th,64,128; elements = { ${h6.map(ipv6ToHex).join(', ')} } }`);
      const kept = claimed.filter((a) => isIPv6(a)).map(ipv6ToHex);
      lines.push(`  set claimed6 { typeof @th,64,128; flags dynamic;${elements(kept)} }`);
      ownMacSet();
      lines.push('  chain claims {');
      lines.push('    type filter hook input priority 0; policy accept;');
      // A takeover's unsolicited NA carries the VIP as its target. Only another host's claims:
      // this node's own NA to ff02::1 comes back through input (MetalLB's NDP socket leaves
      // multicast loopback on) on the link it left by, and nft reports a looped-back packet as
      // `pkttype multicast` like a received one. Its source, though, is one of this node's own
      // addresses (the link-local it was sent from): `fib saddr type local` on Linux 6.18, real
      // nft in a netns (test/e2e/l2/fence-claims.test.ts). The own-MAC guard alone fails where
      // `ip -j link` could not be read, and on kernels before d351c1ea (2023) a looped-back
      // packet's missing MAC header read as garbage.
      lines.push(
        `    ${notOwn}icmpv6 type nd-neighbor-advert fib saddr type != local @th,64,128 @held6 add @claimed6 { @th,64,128 } counter`,
      );
      lines.push('  }');
    }
    if (foreign) {
      // :: is the unspecified address; the set is never empty, so the set declaration is valid.
      const own = ['::', ...own6(spec)].map(ipv6ToHex);
      lines.push(`  set own6 { typeof @th,64,128; elements = { ${own.join(', ')} } }`);
      lines.push('  chain output {');
      lines.push('    type filter hook output priority 0; policy accept;');
      heldFirst();
      lines.push('    icmpv6 type nd-neighbor-advert @th,64,128 != @own6 counter drop');
      lines.push('  }');
    } else if (spec.vips6.length > 0 || p6.length > 0 || h6.length > 0) {
      if (spec.vips6.length > 0)
        lines.push(
          `  set vip6 { typeof @th,64,128; elements = { ${spec.vips6.map(ipv6ToHex).join(', ')} } }`,
        );
      const hexRange = (r: string) => r.split('-').map(ipv6ToHex).join('-');
      if (p6.length > 0)
        lines.push(
          `  set pool6 { typeof @th,64,128; flags interval; elements = { ${p6.map(hexRange).join(', ')} } }`,
        );
      lines.push('  chain output {');
      lines.push('    type filter hook output priority 0; policy accept;');
      heldFirst();
      // The ND target address sits 8 bytes into the ICMPv6 header.
      if (spec.vips6.length > 0)
        lines.push('    icmpv6 type nd-neighbor-advert @th,64,128 @vip6 counter drop');
      if (p6.length > 0) lines.push('    icmpv6 type nd-neighbor-advert @th,64,128 @pool6 counter drop');
      lines.push('  }');
    }
    if (spec.memberlistPorts.length > 0) {
      lines.push(`  set memberlist { type inet_service; elements = { ${spec.memberlistPorts.join(', ')} } }`);
      lines.push('  chain memberlist {');
      lines.push('    type filter hook output priority 0; policy accept;');
      // Silence this speaker towards its peers so they declare it dead and re-elect without it.
      lines.push('    meta l4proto { tcp, udp } th dport @memberlist counter drop');
      lines.push('    meta l4proto { tcp, udp } th sport @memberlist counter drop');
      lines.push('  }');
    }
    lines.push('}');
  }
  return `${lines.join('\n')}\n`;
}

const elems = (set: Record<string, unknown>): unknown[] => (Array.isArray(set.elem) ? set.elem : []);

/** An interval set's element as "first-last": a single value, a range, or (IPv4) a prefix. */
function rangeElem(e: unknown, address: (v: string) => string): string {
  const o = e as { range?: [unknown, unknown]; prefix?: { addr?: unknown; len?: unknown } };
  if (Array.isArray(o?.range)) return o.range.map((v) => address(String(v))).join('-');
  if (o?.prefix) {
    const first = v4Number(String(o.prefix.addr));
    return `${v4Text(first)}-${v4Text(first + 2 ** (32 - Number(o.prefix.len)) - 1)}`;
  }
  return `${address(String(e))}-${address(String(e))}`;
}

/**
 * Reads drainguard's fence back from `nft -j list table …` outputs (any order). Returns
 * undefined when no drainguard table exists. Interface names come from the chain names.
 */
export function parseFence(listTableJsons: string[]): FenceSpec | undefined {
  let found = false;
  const spec: FenceSpec = { vips4: [], vips6: [], interfaces: [], memberlistPorts: [] };
  const own: string[] = [];
  let foreign = false;
  for (const text of listTableJsons) {
    const doc = JSON.parse(text) as { nftables?: NftItem[] };
    for (const item of doc.nftables ?? []) {
      const table = item.table as { name?: string } | undefined;
      if (table?.name === FENCE_TABLE) found = true;
      const set = item.set as Record<string, unknown> | undefined;
      if (set && set.table === FENCE_TABLE) {
        if (set.name === 'vip4') spec.vips4.push(...elems(set).map(String));
        if (set.name === 'vip6') spec.vips6.push(...elems(set).map((e) => hexToIpv6(String(e))));
        if (set.name === 'memberlist') spec.memberlistPorts.push(...elems(set).map(Number));
        if (set.name === 'held4' || set.name === 'claimed4') {
          const field = set.name === 'held4' ? 'held' : 'claimed';
          spec[field] = [...(spec[field] ?? []), ...elems(set).map(String)];
        }
        if (set.name === 'ownmacs') spec.ownMacs = [...(spec.ownMacs ?? []), ...elems(set).map(String)];
        if (set.name === 'held6' || set.name === 'claimed6') {
          const field = set.name === 'held6' ? 'held' : 'claimed';
          spec[field] = [...(spec[field] ?? []), ...elems(set).map((e) => hexToIpv6(String(e)))];
        }
        if (set.name === 'pool4' || set.name === 'pool6') {
          const address = set.name === 'pool6' ? hexToIpv6 : (v: string) => v;
          spec.pools = [...(spec.pools ?? []), ...elems(set).map((e) => rangeElem(e, address))];
        }
        if (set.name === 'own4' || set.name === 'own6') {
          foreign = true;
          const xs = elems(set).map(String);
          own.push(
            ...(set.name === 'own6' ? xs.map(hexToIpv6) : xs).filter((a) => a !== '0.0.0.0' && a !== '::'),
          );
        }
      }
      const chain = item.chain as { table?: string; name?: string; hook?: string } | undefined;
      if (chain?.table === FENCE_TABLE && chain.hook === 'egress' && chain.name?.startsWith('egress-'))
        spec.interfaces.push(chain.name.slice('egress-'.length));
    }
  }
  if (foreign) spec.ownAddresses = own;
  return found ? normalizeFence(spec) : undefined;
}
