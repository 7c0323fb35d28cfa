// Ties ebtables-nft rules to their nf_tables handles, so a batch can delete by handle. Pure.
import { canonicalIp, type EbRule, normalizeMac } from './ebtables.ts';

export interface NftChainRule {
  handle: number;
  text: string;
}

export interface NftTable {
  tableHandle: number;
  chains: Map<string, NftChainRule[]>;
}

/** `nft -a list table bridge nat` → table handle and, per chain, rule handles in list order. */
export function parseNftTable(text: string): NftTable {
  const t = /^table bridge nat \{ # handle (\d+)$/m.exec(text);
  if (!t) throw new Error('nft -a list table bridge nat: no "table bridge nat { # handle N" line');
  const chains = new Map<string, NftChainRule[]>();
  let current: NftChainRule[] | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    const c = /^chain (\S+) \{ # handle \d+$/.exec(line);
    if (c) {
      current = [];
      chains.set(c[1]!, current);
      continue;
    }
    if (line === '}') {
      current = undefined;
      continue;
    }
    const r = /^(.*) # handle (\d+)$/.exec(line);
    if (r && current) current.push({ handle: Number(r[2]), text: r[1]! });
  }
  return { tableHandle: Number(t[1]), chains };
}

const sameSequence = (a: NftTable, b: NftTable, chain: string) => {
  const x = a.chains.get(chain) ?? [];
  const y = b.chains.get(chain) ?? [];
  return (
    a.tableHandle === b.tableHandle && x.length === y.length && x.every((r, i) => r.handle === y[i]!.handle)
  );
};

/** The token after `word` in an nft rule text, e.g. after "ether daddr set". */
function after(text: string, word: string): string | undefined {
  const i = text.indexOf(`${word} `);
  if (i < 0) return undefined;
  return text.slice(i + word.length + 1).split(' ')[0];
}

/**
 * Handles for the chain's ebtables rules, position by position, or the reason they cannot
 * be trusted. `before`/`after` are nft listings taken right before and right after the
 * ebtables listing: handles are never reused within a table, so an identical handle
 * sequence (and table handle) on both sides proves nothing was added or removed in between,
 * and both tools walk the same kernel list in the same order. Each position is then
 * cross-checked where nft shows the data (arpreply appears as an opaque xt target; dnat
 * shows its IP and MAC), which catches any misalignment.
 */
export function alignHandles(
  ebRules: readonly EbRule[],
  before: NftTable,
  afterListing: NftTable,
  chain = 'PREROUTING',
): number[] | string {
  if (!sameSequence(before, afterListing, chain)) return `${chain} changed while it was being listed`;
  const nftRules = before.chains.get(chain) ?? [];
  const chainRules = ebRules.filter((r) => r.chain === chain);
  if (nftRules.length !== chainRules.length)
    return `${chain}: nft lists ${nftRules.length} rules, ebtables ${chainRules.length}`;
  for (const [i, r] of chainRules.entries()) {
    const n = nftRules[i]!;
    const isArpreply = n.text.includes('xt target arpreply');
    if ((r.target === 'arpreply') !== isArpreply)
      return `${chain} position ${i + 1}: target differs (${n.text})`;
    const p = r.perPod;
    if (p?.kind === 'dnat') {
      const mac = normalizeMac(after(n.text, 'ether daddr set') ?? '');
      const ipText = after(n.text, p.family === 4 ? 'ip daddr' : 'ip6 daddr');
      if (mac !== p.mac || !ipText || canonicalIp(ipText) !== p.ip)
        return `${chain} position ${i + 1}: nft shows "${n.text}", ebtables "${r.spec}"`;
    }
  }
  return nftRules.map((r) => r.handle);
}
