// A long run in parts: every finished trial is appended to OUT/results.jsonl, so that a run cut
// short (a time budget, a session's end) is continued with FROM= and the same SEED and OUT, and the
// table covers every trial of the seed from 0. Pure: the file's text in, the trials out.
import { join } from 'node:path';
import type { TrialResult } from './report.ts';

/** Where a run records its finished trials, in its OUT. */
export const resultsPath = (out: string): string => join(out, 'results.jsonl');

/** One line of results.jsonl. */
export interface ResultLine {
  seed: number;
  controlPlanes: number;
  result: TrialResult;
}

export const resultLine = (seed: number, controlPlanes: number, result: TrialResult): string =>
  `${JSON.stringify({ seed, controlPlanes, result } satisfies ResultLine)}\n`;

/**
 * The trials 0..from-1 of `seed` (on as many control planes) recorded in results.jsonl's text, the
 * last line of a trial winning (a part run again), and the ones missing. Lines of other
 * seeds or labs, and lines that do not parse (a line cut by a kill), are not counted.
 */
export function earlierResults(
  text: string,
  seed: number,
  controlPlanes: number,
  from: number,
): { results: TrialResult[]; missing: number[] } {
  const byTrial = new Map<number, TrialResult>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let parsed: ResultLine;
    try {
      parsed = JSON.parse(line) as ResultLine;
    } catch {
      continue;
    }
    if (parsed.seed !== seed || parsed.controlPlanes !== controlPlanes) continue;
    const trial = parsed.result?.plan?.trial;
    if (typeof trial === 'number' && trial < from) byTrial.set(trial, parsed.result);
  }
  const missing: number[] = [];
  for (let i = 0; i < from; i++) if (!byTrial.has(i)) missing.push(i);
  return {
    results: [...byTrial.keys()].sort((a, b) => a - b).map((k) => byTrial.get(k) as TrialResult),
    missing,
  };
}
