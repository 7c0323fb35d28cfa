// The L2 fence's nft tables as a whole: finding them and removing them. The sidecar renders and
// reads the fence's contents (sidecar/l2/fence.ts); `drainguard reset --local` only removes it.
import { API_FENCE_TABLE, FENCE_TABLE } from '../names.ts';

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

/** Removes the stale API server's fence (sidecar/api-fence/fence.ts); a no-op when absent. */
export const API_UNFENCE_LINES = [`table inet ${API_FENCE_TABLE} {}`, `delete table inet ${API_FENCE_TABLE}`];

/** The transaction that removes the stale API server's fence. */
export function renderApiUnfence(): string {
  return `${API_UNFENCE_LINES.join('\n')}\n`;
}

/** Whether the stale API server's fence table is present, from `nft -j list tables`. */
export function apiFenceTableIn(listTablesJson: string): boolean {
  const doc = JSON.parse(listTablesJson) as { nftables?: NftItem[] };
  return (doc.nftables ?? []).some((item) => {
    const t = item.table as { family?: string; name?: string } | undefined;
    return t?.name === API_FENCE_TABLE && t.family === 'inet';
  });
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
