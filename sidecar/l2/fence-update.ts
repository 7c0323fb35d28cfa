// Re-rendering a fence without losing a claim. The kernel adds a held VIP to `claimed4`/`claimed6`
// the moment another node's takeover frame arrives (fence.ts); a render that deletes the table and
// adds it again can only carry over the claims it read before, so one that arrived between that
// read and the `nft -f` was lost and the VIP answered again beside its new owner — in a fail-safe
// with the API down, for the whole outage (issue 42). Where the installed table has a claimed set
// the new fence keeps, the transaction therefore never deletes that set: it flushes the table's
// rules, deletes its other chains and sets, and adds the new content, whose declaration of the
// claimed set is the same and so adds nothing. One transaction: the packet path sees the old
// fence or the new one, and every claim the kernel made in between is in the set both use.
import { FENCE_TABLE } from '../../shared/names.ts';
import type { NftItem } from '../../shared/net/fence-tables.ts';

/** What a family's drainguard table holds now, by name (read back from nft). */
export interface InstalledTable {
  chains: string[];
  sets: string[];
}
export type FenceFamily = 'netdev' | 'inet';
export type InstalledFence = Partial<Record<FenceFamily, InstalledTable>>;

/** The set each family's table keeps its claims in. */
export const CLAIMED_SET: Record<FenceFamily, string> = { netdev: 'claimed4', inet: 'claimed6' };

/** Names as the fence writes them: what the kernel hands back is spliced into a script only if so. */
const NFT_NAME = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;

/** The chains and sets of drainguard's tables, from `nft -j list table …` outputs (any order). */
export function installedFence(listTableJsons: readonly string[]): InstalledFence {
  const out: InstalledFence = {};
  for (const text of listTableJsons) {
    const doc = JSON.parse(text) as { nftables?: NftItem[] };
    for (const item of doc.nftables ?? []) {
      const [kind, o] = Object.entries(item)[0] ?? [];
      const obj = o as { family?: string; name?: string; table?: string } | undefined;
      const family = obj?.family;
      if (family !== 'netdev' && family !== 'inet') continue;
      if (kind === 'table' && obj?.name === FENCE_TABLE) out[family] ??= { chains: [], sets: [] };
      if ((kind === 'chain' || kind === 'set') && obj?.table === FENCE_TABLE && obj.name) {
        if (!NFT_NAME.test(obj.name)) throw new Error(`unexpected nft name in the fence: ${obj.name}`);
        out[family] ??= { chains: [], sets: [] };
        (kind === 'chain' ? out[family].chains : out[family].sets).push(obj.name);
      }
    }
  }
  return out;
}

/**
 * The transaction's first lines, before the new tables' content: per family, the table replaced
 * (added empty so the delete cannot fail, then deleted), or — where `keep` names it — emptied of
 * everything but its claimed set.
 */
export function clearLines(keep: InstalledFence): string[] {
  const lines: string[] = [];
  for (const family of ['netdev', 'inet'] as const) {
    const table = `${family} ${FENCE_TABLE}`;
    const kept = keep[family];
    lines.push(`table ${table} {}`);
    if (!kept) {
      lines.push(`delete table ${table}`);
      continue;
    }
    // Rules first: a chain or set still referenced cannot be deleted.
    lines.push(`flush table ${table}`);
    for (const c of kept.chains) lines.push(`delete chain ${table} ${c}`);
    for (const s of kept.sets) if (s !== CLAIMED_SET[family]) lines.push(`delete set ${table} ${s}`);
  }
  return lines;
}
