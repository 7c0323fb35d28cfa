// The drained node's sidecar as it logged the run, one line per entry with its time from the
// drain: printed by the seed sequence so a run whose figures miss a target says why (the pod
// logs are overwritten by the next run).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Every `drainguard` container log under a copied pod-logs directory (CRI format, pino JSON). */
export function sidecarTimeline(podLogs: string, from: number): string[] {
  const lines: string[] = [];
  for (const pod of readdirSync(podLogs)) {
    const dir = join(podLogs, pod, 'drainguard');
    let files: string[];
    try {
      files = readdirSync(dir).sort();
    } catch {
      continue;
    }
    for (const f of files)
      for (const raw of readFileSync(join(dir, f), 'utf8').split('\n')) {
        const json = raw.slice(raw.indexOf('{'));
        let e: Record<string, unknown>;
        try {
          e = JSON.parse(json) as Record<string, unknown>;
        } catch {
          continue;
        }
        const at = Date.parse(String(e.time));
        const { level, msg, time: _t, component: _c, name: _n, ...rest } = e;
        const s = Number.isNaN(at) ? '?' : ((at - from) / 1000).toFixed(2);
        lines.push(`${s} s ${level} ${msg} ${JSON.stringify(rest).slice(0, 300)}`);
      }
  }
  return lines;
}
