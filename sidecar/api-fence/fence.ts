// The stale API server's fence, pure: renders the nft transaction and reads it back. On a draining
// node whose own API server has lost its etcd member (core.ts), connections to it are refused
// with a TCP reset, so their clients (MetalLB's speakers, the sidecar itself, anyone whose
// `kubernetes` Service connection landed there) dial again and reach an API server that is up to
// date. Only loopback sources pass: the sidecar's probe comes from 127.0.0.1 (or ::1), and a
// kubelet or controller on the node that talks to 127.0.0.1:6443 (RKE2's layout) is not aimed at
// the fenced address anyway.
import { isIPv4, isIPv6 } from 'node:net';
import { API_FENCE_TABLE } from '../../shared/names.ts';
import { API_UNFENCE_LINES, type NftItem } from '../../shared/net/fence-tables.ts';

/** An API server's address and port, as the `kubernetes` Service's EndpointSlices list it. */
export interface ApiEndpoint {
  address: string;
  port: number;
}

/** host:port, IPv6 in brackets. */
export const endpointText = (e: ApiEndpoint) =>
  `${e.address.includes(':') ? `[${e.address}]` : e.address}:${e.port}`;

/** Rejects anything that could not be spliced safely into an nft script, naming the field. */
export function validateApiFence(endpoints: readonly ApiEndpoint[]): string[] {
  const problems: string[] = [];
  for (const e of endpoints) {
    if (!isIPv4(e.address) && !isIPv6(e.address))
      problems.push(`address: ${JSON.stringify(e.address)} is not an IP address`);
    if (!Number.isInteger(e.port) || e.port < 1 || e.port > 65535)
      problems.push(`port: ${e.port} is not a port 1-65535`);
  }
  return problems;
}

/** Canonical, sorted, de-duplicated: two fences that mean the same compare equal. */
export function normalizeApiFence(endpoints: readonly ApiEndpoint[]): ApiEndpoint[] {
  const seen = new Map<string, ApiEndpoint>();
  for (const e of endpoints) {
    const address = e.address.toLowerCase();
    seen.set(endpointText({ address, port: e.port }), { address, port: e.port });
  }
  return [...seen].sort(([a], [b]) => a.localeCompare(b)).map(([, e]) => e);
}

export function sameApiFence(a: readonly ApiEndpoint[] | undefined, b: readonly ApiEndpoint[] | undefined) {
  if (!a || !b) return a === b;
  return JSON.stringify(normalizeApiFence(a)) === JSON.stringify(normalizeApiFence(b));
}

/**
 * One `nft -f -` transaction that replaces the table with exactly this fence (re-running it never
 * duplicates a rule). Input, not prerouting: a connection to a LoadBalancer VIP in front of the
 * API servers is DNATed to this node's address first (kube-proxy), and refused then too.
 */
export function renderApiFence(input: readonly ApiEndpoint[]): string {
  const problems = validateApiFence(input);
  if (problems.length > 0) throw new Error(`invalid API server fence: ${problems.join('; ')}`);
  const endpoints = normalizeApiFence(input);
  const v4 = endpoints.filter((e) => isIPv4(e.address));
  const v6 = endpoints.filter((e) => isIPv6(e.address));
  const elements = (es: ApiEndpoint[]) => es.map((e) => `${e.address} . ${e.port}`).join(', ');
  const lines = [...API_UNFENCE_LINES, `table inet ${API_FENCE_TABLE} {`];
  if (v4.length > 0)
    lines.push(`  set api4 { type ipv4_addr . inet_service; elements = { ${elements(v4)} } }`);
  if (v6.length > 0)
    lines.push(`  set api6 { type ipv6_addr . inet_service; elements = { ${elements(v6)} } }`);
  lines.push('  chain input {');
  lines.push('    type filter hook input priority 0; policy accept;');
  // The sidecar's own probe.
  lines.push('    ip saddr 127.0.0.1 accept');
  lines.push('    ip6 saddr ::1 accept');
  if (v4.length > 0) lines.push('    ip daddr . tcp dport @api4 counter reject with tcp reset');
  if (v6.length > 0) lines.push('    ip6 daddr . tcp dport @api6 counter reject with tcp reset');
  lines.push('  }');
  lines.push('}');
  return `${lines.join('\n')}\n`;
}

/** The fence read back from `nft -j list table inet drainguard-api`; undefined when there is none. */
export function parseApiFence(listTableJson: string): ApiEndpoint[] | undefined {
  const doc = JSON.parse(listTableJson) as { nftables?: NftItem[] };
  let found = false;
  const endpoints: ApiEndpoint[] = [];
  for (const item of doc.nftables ?? []) {
    const table = item.table as { name?: string } | undefined;
    if (table?.name === API_FENCE_TABLE) found = true;
    const set = item.set as { table?: string; name?: string; elem?: unknown } | undefined;
    if (set?.table !== API_FENCE_TABLE || (set.name !== 'api4' && set.name !== 'api6')) continue;
    for (const e of Array.isArray(set.elem) ? set.elem : []) {
      const concat = (e as { concat?: unknown[] })?.concat;
      if (!Array.isArray(concat) || concat.length !== 2) continue;
      endpoints.push({ address: String(concat[0]), port: Number(concat[1]) });
    }
  }
  return found ? normalizeApiFence(endpoints) : undefined;
}

/**
 * The `ss` arguments that destroy the established connections to this endpoint (SOCK_DESTROY: the
 * kernel sends each peer a reset). A silent watch sends nothing, so the reject rule alone would
 * never reach it. Matched on the server side (local address and port); the probe's connections
 * from loopback stay.
 */
export function killArgs(e: ApiEndpoint): string[] {
  const v6 = e.address.includes(':');
  const a = v6 ? `[${e.address}]` : e.address;
  const loopback = v6 ? '[::1]' : '127.0.0.1';
  return [
    '-K',
    '-H',
    '-tn',
    'state',
    'established',
    'src',
    a,
    'and',
    'not',
    'dst',
    loopback,
    'and',
    `( sport = :${e.port} )`,
  ];
}

/** Where the probe connects from: loopback of the endpoint's family (the fence lets it through). */
export const probeSource = (e: ApiEndpoint) => (e.address.includes(':') ? '::1' : '127.0.0.1');

/** How many sockets `ss -K -H …` reported destroyed (one line each). */
export const killedCount = (ssOutput: string) => ssOutput.split('\n').filter((l) => l.trim() !== '').length;

/** The endpoints as one comparable key, whatever their order. */
export const endpointsKey = (es: ApiEndpoint[]) => es.map(endpointText).sort().join(',');
