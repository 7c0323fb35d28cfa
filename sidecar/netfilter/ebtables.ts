// Pure parsing of ebtables listings (nft and legacy flavours) into rules drainguard can reason about.
// Nothing here runs a tool; ./cleaner.ts lists the rules through the ToolRunner and feeds it the text.

export type Flavour = 'nft' | 'legacy';

/** What `ebtables -V` says: "(nf_tables)" for ebtables-nft; legacy prints "(legacy)" or a bare v2.0.x. */
export function parseFlavour(versionOutput: string): Flavour | undefined {
  const v = versionOutput.trim();
  if (/\(nf_tables\)/.test(v)) return 'nft';
  if (/\(legacy\)/.test(v) || /ebtables v2\.0/.test(v)) return 'legacy';
  return undefined;
}

/** A MAC as 12 lower-case hex digits, or undefined. Legacy listings drop leading zeros ("0:d:3a:…"). */
export function normalizeMac(text: string): string | undefined {
  const parts = text.split(':');
  if (parts.length !== 6) return undefined;
  let out = '';
  for (const p of parts) {
    if (!/^[0-9a-fA-F]{1,2}$/.test(p)) return undefined;
    out += p.toLowerCase().padStart(2, '0');
  }
  return out;
}

/** Colon form of a normalized MAC, for messages. */
export const formatMac = (hex: string): string => hex.match(/../g)?.join(':') ?? hex;

/** Multicast bit set (includes broadcast): never a pod's MAC. */
export const isGroupMac = (hex: string): boolean => (Number.parseInt(hex.slice(0, 2), 16) & 1) === 1;

export type RuleKind = 'arpreply' | 'dnat';

export interface EbRule {
  table: string;
  chain: string;
  /** 1-based position in its chain at listing time (informational: delete by spec, never by number). */
  position: number;
  /** The rule exactly as listed, without counters: what `-D CHAIN <spec>` takes back. */
  spec: string;
  tokens: string[];
  target: string;
  /** Set only for the exact per-pod shapes azure-vnet writes (see classify). */
  perPod?: { kind: RuleKind; family: 4 | 6; ip: string; mac: string; inIface?: string };
}

export interface Listing {
  table: string;
  chains: { name: string; policy: string; entries: number }[];
  rules: EbRule[];
}

export class ListingError extends Error {
  override name = 'ListingError';
}

/** Whitespace split that keeps "quoted strings" (comments) as one token. */
function tokenize(spec: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|(\S+)/g;
  for (let m = re.exec(spec); m; m = re.exec(spec)) out.push(m[0]);
  return out;
}

/**
 * Parses `ebtables -t <table> -L` output. Both flavours print the same frame
 * ("Bridge table:", "Bridge chain: X, entries: N, policy: P", one rule a line); counters
 * (--Lc) are stripped if present. Differences in the rules themselves (MAC zero padding,
 * optional /32 masks, default targets) are absorbed by classify().
 */
export function parseListing(text: string): Listing {
  const lines = text.split('\n');
  let table = '';
  let chain: Listing['chains'][number] | undefined;
  const chains: Listing['chains'] = [];
  const rules: EbRule[] = [];
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim();
    if (!line) continue;
    const t = /^Bridge table: (\S+)$/.exec(line);
    if (t) {
      table = t[1]!;
      continue;
    }
    const c = /^Bridge chain: ([^,]+), entries: (\d+), policy: (\S+)$/.exec(line);
    if (c) {
      chain = { name: c[1]!, entries: Number(c[2]), policy: c[3]! };
      chains.push(chain);
      continue;
    }
    if (!chain || !table)
      throw new ListingError(`line ${i + 1}: rule outside a chain: ${line.slice(0, 120)}`);
    // Counters as printed by --Lc: " , pcnt = 0 -- bcnt = 0"
    const spec = line.replace(/\s*,\s*pcnt = \d+ -- bcnt = \d+$/, '').trim();
    // Legacy prints rule numbers with --Ln ("1. -p ARP …"); accept and drop them.
    const unnumbered = spec.replace(/^\d+\.\s+/, '');
    const tokens = tokenize(unnumbered);
    const jIdx = tokens.indexOf('-j');
    const target = jIdx >= 0 ? (tokens[jIdx + 1] ?? '') : '';
    const position = rules.filter((r) => r.chain === chain!.name).length + 1;
    const rule: EbRule = { table, chain: chain.name, position, spec: unnumbered, tokens, target };
    const perPod = classify(rule);
    if (perPod) rule.perPod = perPod;
    rules.push(rule);
  }
  if (!table) throw new ListingError('not an ebtables listing: no "Bridge table:" line');
  for (const ch of chains) {
    const n = rules.filter((r) => r.chain === ch.name).length;
    if (n !== ch.entries)
      throw new ListingError(`chain ${ch.name}: header says ${ch.entries} entries, listed ${n}`);
  }
  return { table, chains, rules };
}

/** Single-address match value: "10.0.0.5", "10.0.0.5/32", "10.0.0.5/255.255.255.255", IPv6 with /128. */
function singleIp(value: string, family: 4 | 6): string | undefined {
  const [addr, mask, ...rest] = value.split('/');
  if (rest.length || !addr) return undefined;
  if (family === 4) {
    if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(addr) || addr.split('.').some((o) => Number(o) > 255))
      return undefined;
    if (mask !== undefined && mask !== '32' && mask !== '255.255.255.255') return undefined;
    return addr;
  }
  if (!addr.includes(':') || !/^[0-9a-fA-F:.]+$/.test(addr)) return undefined;
  if (mask !== undefined && mask !== '128' && mask !== 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff')
    return undefined;
  return canonicalIp(addr);
}

/** Canonical text of an IP (lower case, compressed IPv6) so listings and pod IPs compare equal. */
export function canonicalIp(ip: string): string {
  if (!ip.includes(':')) return ip;
  try {
    return new URL(`http://[${ip}]/`).hostname.slice(1, -1);
  } catch {
    return ip.toLowerCase();
  }
}

const ETHERTYPE: Record<string, string> = {
  arp: 'ARP',
  '0x806': 'ARP',
  '0x0806': 'ARP',
  ipv4: 'IPv4',
  '0x800': 'IPv4',
  '0x0800': 'IPv4',
  ipv6: 'IPv6',
  '0x86dd': 'IPv6',
};

/**
 * Recognises exactly the per-pod rules azure-vnet writes (facts.md) and nothing else:
 *   -p ARP [-i X] --arp-op Request --arp-ip-dst IP -j arpreply --arpreply-mac MAC [--arpreply-target T]
 *   -p IPv4|IPv6 [-i X] --ip-dst|--ip6-dst IP -j dnat --to-dst MAC [--dnat-target T]
 * Any other option (another match, a comment, a wildcard interface such as az+, a prefix
 * instead of one address, a group MAC) makes the rule "not ours to judge": it is never touched.
 */
export function classify(rule: Pick<EbRule, 'table' | 'chain' | 'tokens'>): EbRule['perPod'] | undefined {
  if (rule.table !== 'nat' || rule.chain !== 'PREROUTING') return undefined;
  const opts = new Map<string, string>();
  const t = rule.tokens;
  for (let i = 0; i < t.length; i += 2) {
    const k = t[i]!;
    const v = t[i + 1];
    if (!k.startsWith('-') || v === undefined || v.startsWith('-') || opts.has(k)) return undefined;
    opts.set(k, v);
  }
  const proto = ETHERTYPE[(opts.get('-p') ?? '').toLowerCase()];
  const target = opts.get('-j');
  const inIface = opts.get('-i');
  if (inIface !== undefined && (inIface.endsWith('+') || inIface.startsWith('!'))) return undefined;
  const allowed = (keys: string[]) => [...opts.keys()].every((k) => keys.includes(k));
  if (target === 'arpreply' && proto === 'ARP') {
    if (!allowed(['-p', '-i', '--arp-op', '--arp-ip-dst', '-j', '--arpreply-mac', '--arpreply-target']))
      return undefined;
    if (opts.get('--arp-op') !== 'Request') return undefined;
    const ip = singleIp(opts.get('--arp-ip-dst') ?? '', 4);
    const mac = normalizeMac(opts.get('--arpreply-mac') ?? '');
    if (!ip || !mac || isGroupMac(mac)) return undefined;
    return { kind: 'arpreply', family: 4, ip, mac, ...(inIface ? { inIface } : {}) };
  }
  if (target === 'dnat' && (proto === 'IPv4' || proto === 'IPv6')) {
    const family = proto === 'IPv4' ? 4 : 6;
    const ipOpt = family === 4 ? '--ip-dst' : '--ip6-dst';
    if (!allowed(['-p', '-i', ipOpt, '-j', '--to-dst', '--dnat-target'])) return undefined;
    const ip = singleIp(opts.get(ipOpt) ?? '', family);
    const mac = normalizeMac(opts.get('--to-dst') ?? '');
    if (!ip || !mac || isGroupMac(mac)) return undefined;
    return { kind: 'dnat', family, ip, mac, ...(inIface ? { inIface } : {}) };
  }
  return undefined;
}

/** Flavour-independent identity of a per-pod rule: the same rule listed by nft or legacy gets one key. */
export function ruleKey(rule: EbRule): string {
  const p = rule.perPod;
  if (!p) return `${rule.table}|${rule.chain}|${rule.spec}`;
  return `${rule.table}|${rule.chain}|${p.kind}|${p.ip}|${p.mac}|${p.inIface ?? ''}`;
}
