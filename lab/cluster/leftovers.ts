// What drainguard left on a node once a drain is over (the robustness scene's settle checks it):
// nothing, when all is well. Pure.
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION, LABEL_OWNED_ANNOTATION } from '../../shared/names.ts';

/** A Node after the settle, and the nft tables listed in its namespace. */
export interface NodeAfter {
  name: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /**
   * Families of drainguard's fence table present (shared/net/fence-tables.ts fenceTablesIn), and
   * 'api' for the stale API server's fence (apiFenceTableIn).
   */
  fenceTables: string[];
}

/** What drainguard left on a node once the drain is over: nothing, when all is well. */
export function leftoversOf(n: NodeAfter): string[] {
  const out: string[] = [];
  if (EXCLUDE_LABEL in n.labels) out.push(`label ${EXCLUDE_LABEL}`);
  if (LABEL_OWNED_ANNOTATION in n.annotations) out.push(`annotation ${LABEL_OWNED_ANNOTATION}`);
  for (const f of n.fenceTables)
    out.push(
      f === 'api'
        ? 'nft table inet drainguard-api (stale API server fence)'
        : `nft table ${f} drainguard (fence)`,
    );
  const state = n.annotations[L2_STATE_ANNOTATION];
  if (state) {
    try {
      const s = JSON.parse(state) as { phase?: string; fenced?: boolean; memberlistCut?: boolean };
      if (s.phase && s.phase !== 'idle') out.push(`L2 state phase ${s.phase}`);
      if (s.fenced) out.push('L2 state fenced');
      if (s.memberlistCut) out.push('memberlist cut');
    } catch {
      out.push(`annotation ${L2_STATE_ANNOTATION} is not JSON`);
    }
  }
  return out;
}
