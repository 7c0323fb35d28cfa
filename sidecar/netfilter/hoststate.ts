// Pure parsing of `ip -j` / `bridge -j` output and a longest-prefix route lookup.
import { isIP } from 'node:net';
import { canonicalIp, normalizeMac } from './ebtables.ts';

export interface Neighbour {
  ip: string;
  dev: string;
  /** Normalized 12-hex MAC; absent for FAILED/INCOMPLETE entries. */
  mac?: string;
  states: string[];
}

export interface Iface {
  name: string;
  mac?: string;
  ips: string[];
  /** linkinfo.info_kind from `ip -d`: veth, bridge, vxlan…; absent for physical NICs. */
  kind?: string;
}

export interface Route {
  family: 4 | 6;
  /** Network as bigint and prefix length; default routes have len 0. */
  net: bigint;
  len: number;
  dev?: string;
  metric: number;
}

export interface FdbEntry {
  mac: string;
  dev: string;
  master?: string;
  state: string;
  flags: string[];
}

function parseJsonArray(text: string, what: string): Record<string, unknown>[] {
  const trimmed = text.trim();
  if (!trimmed) return [];
  let v: unknown;
  try {
    v = JSON.parse(trimmed);
  } catch (e) {
    throw new Error(`${what}: output is not JSON (${(e as Error).message})`);
  }
  if (!Array.isArray(v)) throw new Error(`${what}: expected a JSON array`);
  return v as Record<string, unknown>[];
}

/** `ip -j neigh show` → entries (dst, dev, lladdr — absent when FAILED — and the state array). */
export function parseNeighbours(text: string): Neighbour[] {
  const out: Neighbour[] = [];
  for (const e of parseJsonArray(text, 'ip -j neigh show')) {
    if (typeof e.dst !== 'string' || typeof e.dev !== 'string' || !isIP(e.dst)) continue;
    const mac = typeof e.lladdr === 'string' ? normalizeMac(e.lladdr) : undefined;
    const states = Array.isArray(e.state) ? e.state.filter((s): s is string => typeof s === 'string') : [];
    out.push({ ip: canonicalIp(e.dst), dev: e.dev, ...(mac ? { mac } : {}), states });
  }
  return out;
}

/** `ip -d -j addr show` → interfaces with MAC, addresses and link kind. */
export function parseAddrs(text: string): Iface[] {
  return parseJsonArray(text, 'ip -d -j addr show').flatMap((e) => {
    if (typeof e.ifname !== 'string') return [];
    const mac = typeof e.address === 'string' ? normalizeMac(e.address) : undefined;
    const info = Array.isArray(e.addr_info) ? (e.addr_info as Record<string, unknown>[]) : [];
    const ips = info.flatMap((a) =>
      typeof a.local === 'string' && isIP(a.local) ? [canonicalIp(a.local)] : [],
    );
    const kind = (e.linkinfo as { info_kind?: unknown } | undefined)?.info_kind;
    return [{ name: e.ifname, ...(mac ? { mac } : {}), ips, ...(typeof kind === 'string' ? { kind } : {}) }];
  });
}

/** `bridge -j fdb show` → entries. */
export function parseFdb(text: string): FdbEntry[] {
  return parseJsonArray(text, 'bridge -j fdb show').flatMap((e) => {
    const mac = typeof e.mac === 'string' ? normalizeMac(e.mac) : undefined;
    if (!mac || typeof e.ifname !== 'string') return [];
    return [
      {
        mac,
        dev: e.ifname,
        ...(typeof e.master === 'string' ? { master: e.master } : {}),
        state: typeof e.state === 'string' ? e.state : '',
        flags: Array.isArray(e.flags) ? e.flags.filter((f): f is string => typeof f === 'string') : [],
      },
    ];
  });
}

export function ipToBigint(ip: string): { family: 4 | 6; value: bigint } | undefined {
  const fam = isIP(ip);
  if (fam === 4) {
    const v = ip.split('.').reduce((acc, o) => (acc << 8n) | BigInt(Number(o)), 0n);
    return { family: 4, value: v };
  }
  if (fam === 6) {
    // Expand "::" and any embedded IPv4 tail into 8 groups.
    let text = ip.toLowerCase();
    const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
    if (v4) {
      const n = ipToBigint(v4[1]!)!.value;
      text = text.slice(0, -v4[1]!.length) + `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
    }
    const [head, tail] = text.split('::') as [string, string | undefined];
    const h = head ? head.split(':') : [];
    const t = tail ? tail.split(':') : [];
    const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
    if (groups.length !== 8) return undefined;
    return { family: 6, value: groups.reduce((acc, g) => (acc << 16n) | BigInt(`0x${g || '0'}`), 0n) };
  }
  return undefined;
}

/** `ip -j [-6] route show table main` → unicast routes (local/broadcast/multicast/blackhole are not a device route). */
export function parseRoutes(text: string, family: 4 | 6): Route[] {
  return parseJsonArray(text, `ip -j ${family === 6 ? '-6 ' : ''}route show`).flatMap((e) => {
    const type = typeof e.type === 'string' ? e.type : 'unicast';
    if (type !== 'unicast') return [];
    const dst = typeof e.dst === 'string' ? e.dst : '';
    let net = 0n;
    let len = 0;
    if (dst !== 'default') {
      const [addr, l] = dst.split('/');
      const parsed = ipToBigint(addr ?? '');
      if (!parsed || parsed.family !== family) return [];
      len = l === undefined ? (family === 4 ? 32 : 128) : Number(l);
      net = parsed.value;
    }
    let dev = typeof e.dev === 'string' ? e.dev : undefined;
    if (!dev && Array.isArray(e.nexthops)) {
      const first = (e.nexthops as Record<string, unknown>[])[0];
      if (first && typeof first.dev === 'string') dev = first.dev;
    }
    const metric = typeof e.metric === 'number' ? e.metric : 0;
    return [{ family, net, len, metric, ...(dev ? { dev } : {}) }];
  });
}

/** The device of the most specific route to ip (lowest metric on ties), as the kernel's main table would pick. */
export function routeDevice(routes: readonly Route[], ip: string): string | undefined {
  const a = ipToBigint(ip);
  if (!a) return undefined;
  const bits = a.family === 4 ? 32 : 128;
  let best: Route | undefined;
  for (const r of routes) {
    if (r.family !== a.family) continue;
    const shift = BigInt(bits - r.len);
    if (r.len > 0 && a.value >> shift !== r.net >> shift) continue;
    if (!best || r.len > best.len || (r.len === best.len && r.metric < best.metric)) best = r;
  }
  return best?.dev;
}
