// make bench-lease: leaderless window when the leader goes, with drainguard's handover vs. the
// expiry baseline (client-go candidates, 15 s / 10 s / 2 s, jitter 1.2), 10 trials each:
// - on real kubelets (lab cluster, `kubectl drain` of the leader's node; real-kubelets.ts): the
//   JSON's main fields, with "kubelet":"real";
// - on the kubelet stand-in against one real API server (leader pod deleted; trials in parallel
//   namespaces): the same fields prefixed `standin_`. LEASE_BENCH_REAL=0 runs this one only.
// Leaderless window = from the old leader container's exit to the successor's first leader
// work. Last line: one JSON object.

import { startControlPlane } from '../../../lab/bed/control-plane.ts';
import { LeaseScene } from '../../../lab/bed/lease-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import { realKubeletTrials } from './real-kubelets.ts';

const TRIALS = Number(process.env.LEASE_BENCH_TRIALS ?? 10);
// Sidecars are real processes: a few at a time keeps a 2-core machine from timing itself.
const DRAINGUARD_PARALLEL = Number(process.env.LEASE_BENCH_PARALLEL ?? 3);

interface Trial {
  mode: 'drainguard' | 'baseline';
  leaderlessMs: number;
  /** Old leader's exit to the Lease write that made the successor leader (handover or takeover). */
  writeMs: number;
  splitBrain: number;
  outcome?: string;
}

async function trial(cp: Awaited<ReturnType<typeof startControlPlane>>, mode: Trial['mode']): Promise<Trial> {
  // Twenty scenes at once: a calmer kubelet poll keeps the API server (and the machine) unloaded.
  const w = await LeaseScene.create(cp, { nodes: ['a', 'b'], kubeletPollMs: 250 });
  try {
    const sidecar = mode === 'drainguard' ? {} : (false as const);
    const a = await w.addPod({ name: 'router-a', node: 'a', sidecar });
    await w.waitLeading('router-a');
    const b = await w.addPod({ name: 'router-b', node: 'b', sidecar });
    await w.waitSidecarsReady(60_000);
    // Let router-b settle into its retry rhythm (it has seen the record at least once).
    await waitFor('router-b tried', () => b.sim.attempts >= 2, { timeoutMs: 20_000, intervalMs: 50 });
    // A deletion does not know the successor's retry rhythm: start at a random phase of it
    // (right after a try the wait would be a whole 2-4.4 s period, not the ~1.7 s average).
    // Two longest periods of random delay bring the phase close to uniform.
    await new Promise((r) => setTimeout(r, Math.random() * 8_800));
    await w.deletePod('router-a');
    await waitFor('router-b leading', () => b.sim.leading, { timeoutMs: 60_000, intervalMs: 10 });
    const exit = a.sim.intervals.at(-1)?.end;
    if (exit === undefined) throw new Error('router-a never stopped working');
    const start = b.sim.firstWorkSince(exit - 60_000);
    if (start === undefined) throw new Error('router-b never started working');
    // The handover write's acquireTime survives the successor's renews: split the window there.
    const acquired = Date.parse((await w.readLease()).spec?.acquireTime ?? '');
    if (process.env.LEASE_BENCH_DEBUG)
      process.stderr.write(
        `exit ${exit} write ${acquired - exit} start ${start - exit} tries ${b.sim.tries.map((t) => t - exit).join(',')}\n`,
      );
    await a.managed.deleted;
    let outcome: string | undefined;
    if (a.sidecar) {
      const done = a.sidecar.find((l) => l.msg === 'Lease handover finished');
      outcome = (done?.results as { outcome: string }[] | undefined)?.[0]?.outcome;
    }
    return {
      mode,
      leaderlessMs: start - exit,
      writeMs: acquired - exit,
      splitBrain: w.splitBrain().length,
      ...(outcome ? { outcome } : {}),
    };
  } finally {
    await w.cleanup();
  }
}

async function pool<T>(n: number, jobs: (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, jobs.length) }, async () => {
      while (next < jobs.length) {
        const i = next++;
        out[i] = await jobs[i]!();
      }
    }),
  );
  return out;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

async function main() {
  const cp = await startControlPlane();
  try {
    const report = (t: Trial) => {
      process.stdout.write(
        `${t.mode.padEnd(10)} leaderless ${(t.leaderlessMs / 1000).toFixed(2)} s (write after ${(t.writeMs / 1000).toFixed(2)} s)` +
          `${t.outcome ? ` outcome ${t.outcome}` : ''}${t.splitBrain ? ` SPLIT-BRAIN ${t.splitBrain}` : ''}\n`,
      );
      return t;
    };
    // The baseline costs no CPU while it waits out the expiry: run all of it alongside.
    const [baseline, drainguard] = await Promise.all([
      pool(
        TRIALS,
        Array.from({ length: TRIALS }, () => () => trial(cp, 'baseline').then(report)),
      ),
      pool(
        DRAINGUARD_PARALLEL,
        Array.from({ length: TRIALS }, () => () => trial(cp, 'drainguard').then(report)),
      ),
    ]);
    const round = (x: number) => Math.round(x * 1000) / 1000;
    const figures = (dgMs: number[], blMs: number[], splits: number) => {
      const dg = median(dgMs) / 1000;
      const bl = median(blMs) / 1000;
      return {
        leaderless_median_s: round(dg),
        baseline_leaderless_median_s: round(bl),
        speedup: round(bl / dg),
        split_brain_events: splits,
      };
    };
    const standin = figures(
      drainguard.map((t) => t.leaderlessMs),
      baseline.map((t) => t.leaderlessMs),
      [...drainguard, ...baseline].reduce((n, t) => n + t.splitBrain, 0),
    );
    // The same measurement at `kubectl drain` on real kubelets (lab cluster), unless turned off.
    const real =
      process.env.LEASE_BENCH_REAL === '0'
        ? undefined
        : await realKubeletTrials(
            TRIALS,
            (t) =>
              process.stdout.write(
                `real ${t.mode.padEnd(10)} leaderless ${(t.leaderlessMs / 1000).toFixed(2)} s${t.splitBrain ? ' SPLIT-BRAIN' : ''}\n`,
              ),
            (l) => process.stdout.write(`# ${l}\n`),
          );
    const summary = real
      ? {
          bench: 'lease',
          kubelet: 'real',
          trials: TRIALS,
          ...figures(
            real.filter((t) => t.mode === 'drainguard').map((t) => t.leaderlessMs),
            real.filter((t) => t.mode === 'baseline').map((t) => t.leaderlessMs),
            real.reduce((n, t) => n + t.splitBrain, 0),
          ),
          ...Object.fromEntries(Object.entries(standin).map(([key, v]) => [`standin_${key}`, v])),
        }
      : { bench: 'lease', kubelet: 'standin', trials: TRIALS, ...standin };
    process.stdout.write(`${JSON.stringify(summary)}\n`);
  } finally {
    await cp.stop();
  }
}

await main();
