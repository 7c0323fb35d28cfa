// Batch deletion plans: text for one tool invocation each. Pure.
import type { StaleNeighbour, StaleRule } from './decide.ts';

/**
 * Input for `ebtables-restore --noflush`: one `-D CHAIN <spec>` per rule occurrence,
 * grouped by table, committed once. Why this and not `nft -f -` with handles:
 * - ebtables-nft-restore turns the whole file into ONE nf_tables transaction: all
 *   deletions apply or none do (a rule that vanished since the re-list fails the batch,
 *   and we re-list and retry), and 2,000 deletions take ~50 ms instead of one exec each.
 * - it deletes by exact spec with ebtables' own matcher, so what we delete is exactly the
 *   rule we listed and judged. `nft -a list table bridge nat` cannot give that: arpreply
 *   rules show up as an opaque "xt match arp … xt target arpreply" (no IP, no MAC), so
 *   handles could only be tied to rules by position across two listings — racy.
 * - duplicates: each -D removes the first match, so an n-times-listed rule gets n lines.
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

/** Per-rule argv for the baseline and for flavours without a usable batch (legacy). */
export function ebtablesDeleteArgs(r: StaleRule): string[] {
  return ['-t', r.rule.table, '-D', r.rule.chain, ...r.rule.tokens];
}

/** Input for `ip -force -batch -`: deletes one neighbour per line, carrying on past entries already gone. */
export function neighbourBatchInput(neighbours: readonly StaleNeighbour[]): string {
  return neighbours.map(({ neighbour: n }) => `neigh del ${n.ip} dev ${n.dev}\n`).join('');
}
