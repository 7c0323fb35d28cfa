// The L2 fence's nft tables as a whole: finding them and removing them. The sidecar renders and
// reads the fence's contents (sidecar/l2/fence.ts); `drainguard reset --local` only removes it.
import { FENCE_TABLE } from '../names.ts';

/** Removes both tables; "add" first makes the delete safe when a table is absent (one transaction). */
export const UNFENCE_LINES = [
  `table netdev ${FENCE_TABLE} {}`,
  `delete table netdev ${FENCE_TABLE}`,
  `table inet ${FENCE_TABLE} {}`,
  `delete table inet ${FENCE_TABLE}`,
];

/** The transaction that removes the fence (a no-op when none is installed). */
export function renderUnfence(): string {
  return `${UNFENCE_LINES.join('\n')}\n`;
}

/** One item of `nft -j` output: `{ table: {...} }`, `{ chain: {...} }`, … */
export type NftItem = Record<string, Record<string, unknown>>;

/** Table families present, from `nft -j list tables`. */
export function fenceTablesIn(listTablesJson: string): ('netdev' | 'inet')[] {
  const doc = JSON.parse(listTablesJson) as { nftables?: NftItem[] };
  const out = new Set<'netdev' | 'inet'>();
  for (const item of doc.nftables ?? []) {
    const t = item.table as { family?: string; name?: string } | undefined;
    if (t?.name === FENCE_TABLE && (t.family === 'netdev' || t.family === 'inet')) out.add(t.family);
  }
  return [...out].sort() as ('netdev' | 'inet')[];
}
