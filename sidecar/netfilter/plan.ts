// Batch deletion plans: text for one tool invocation each. Pure.
import type { StaleNeighbour, StaleRule } from './decide.ts';

/**
 * Batch deletion, and why two forms (the per-rule exec baseline costs ~20 ms a rule):
 * - nft flavour, first choice: `nft -f -` with `delete rule bridge nat PREROUTING handle N`
 *   lines (nftDeleteInput). One nf_tables transaction, all or nothing, ~30 ms for 2,000
 *   rules. Exact because the handles come from alignHandles: the ebtables listing we judged
 *   is bracketed by two `nft -a` listings with the same handle sequence (handles are never
 *   reused within a table) and checked position by position. `nft -a` alone cannot identify
 *   an arpreply rule (it prints an opaque "xt target arpreply"), hence the bracket. Residual
 *   risk, accepted and documented: the whole bridge nat table deleted and recreated in the
 *   milliseconds between the second listing and the transaction.
 * - fallback, and whenever handles cannot be proven: `ebtables-restore --noflush` with one
 *   `-D CHAIN <spec>` per rule occurrence (below). Also one transaction, exact by spec
 *   (ebtables' own matcher), but each -D re-scans the chain from the top: 2,000 deletions
 *   among 500 kept rules take ~0.8 s instead of ~30 ms.
 * Duplicates: each -D removes the first match, so an n-times-listed rule gets n lines; with
 * handles every occurrence has its own handle.
 * Only exact per-pod shapes are ever planned (classify), whose tokens contain no quotes
 * or newlines, so a spec cannot smuggle another command into the file.
 */
export function ebtablesRestoreInput(rules: readonly StaleRule[]): string {
  const byTable = new Map<string, string[]>();
  for (const { rule } of rules) {
    if (/[\n\r"']/.test(rule.spec))
      throw new Error(`refusing to plan a rule with quotes or newlines: ${rule.spec}`);
    const lines = byTable.get(rule.table) ?? [];
    lines.push(`-D ${rule.chain} ${rule.spec}`);
    byTable.set(rule.table, lines);
  }
  let out = '';
  for (const [table, lines] of byTable) out += `*${table}\n${lines.join('\n')}\nCOMMIT\n`;
  return out;
}

/** `nft -f -` input deleting the listed rules by the handles aligned with their listing. */
export function nftDeleteInput(rules: readonly StaleRule[], handles: readonly number[]): string {
  return rules
    .map(({ rule }) => {
      const h = handles[rule.position - 1];
      if (rule.table !== 'nat' || rule.chain !== 'PREROUTING' || h === undefined)
        throw new Error(`no handle for ${rule.table} ${rule.chain} position ${rule.position}`);
      return `delete rule bridge nat PREROUTING handle ${h}\n`;
    })
    .join('');
}

/** Per-rule argv for the baseline and for flavours without a usable batch (legacy). */
export function ebtablesDeleteArgs(r: StaleRule): string[] {
  return ['-t', r.rule.table, '-D', r.rule.chain, ...r.rule.tokens];
}

/** Input for `ip -force -batch -`: deletes one neighbour per line, carrying on past entries already gone. */
export function neighbourBatchInput(neighbours: readonly StaleNeighbour[]): string {
  return neighbours.map(({ neighbour: n }) => `neigh del ${n.ip} dev ${n.dev}\n`).join('');
}
