// A long run in parts (test/robustness/resume.ts): the trials before FROM read back from
// results.jsonl, so that the table of a run continued covers every trial of its seed.
import t from 'tap';
import type { TrialResult } from '../../robustness/report.ts';
import { earlierResults, resultLine } from '../../robustness/resume.ts';

const result = (trial: number, darkMs = 0): TrialResult => ({
  plan: { seed: 110, trial, action: 'drain', subject: 'vip-owner', faults: [] },
  drained: true,
  darkMs,
  dualMs: 0,
  violations: [],
});

t.test('the trials before FROM, in order, from the lines of this seed and lab', async (t) => {
  const text = [
    resultLine(110, 1, result(1)),
    resultLine(110, 1, result(0)),
    resultLine(111, 1, result(2)),
    resultLine(110, 3, result(2)),
    resultLine(110, 1, result(2)),
    resultLine(110, 1, result(3)),
  ].join('');
  const e = earlierResults(text, 110, 1, 3);
  t.strictSame(
    e.results.map((r) => r.plan.trial),
    [0, 1, 2],
    'trial 3 is not before FROM; seed 111 and the HA lab are other runs',
  );
  t.strictSame(e.missing, []);
});

t.test('a trial missing is named: the run cannot be continued from there', async (t) => {
  const e = earlierResults(resultLine(110, 1, result(0)) + resultLine(110, 1, result(2)), 110, 1, 4);
  t.strictSame(e.missing, [1, 3]);
  t.strictSame(earlierResults('', 110, 1, 2).missing, [0, 1], 'no file yet');
  t.strictSame(earlierResults('', 110, 1, 0), { results: [], missing: [] }, 'FROM=0: nothing before');
});

t.test('the last line of a trial wins; a line cut by a kill is not counted', async (t) => {
  const text = `${resultLine(110, 1, result(0, 300))}${resultLine(110, 1, result(0, 50))}{"seed":110,"contr`;
  const e = earlierResults(text, 110, 1, 1);
  t.equal(e.results[0]?.darkMs, 50);
  t.equal(e.results.length, 1);
});
