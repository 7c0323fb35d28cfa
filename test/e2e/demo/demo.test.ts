// `make demo` end to end, as a user runs it: its own lab cluster (real kubelets, controllers,
// containerd, our image), judged by what it prints and writes, and by what it leaves behind —
// nothing, Ctrl-C included.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import t from 'tap';
import { type ClusterState, leftovers } from '../../../lab/cluster/teardown.ts';
import { waitFor } from '../../../shared/clock.ts';

const RUN = new URL('../../../demo/run.ts', import.meta.url).pathname;
const T = { timeoutMs: 300_000, intervalMs: 100 };

interface Demo {
  child: ChildProcess;
  out: () => string;
  exited: Promise<number | null>;
  /** The cluster's state as the demo saved it (read once its nodes run). */
  state: () => Promise<ClusterState>;
}

function startDemo(): Demo {
  const child = spawn(process.execPath, [RUN], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  let st: Promise<ClusterState> | undefined;
  const state = () => {
    st ??= waitFor(
      'the demo names its cluster state',
      () => {
        const dir = /cluster state (\S+)/.exec(out)?.[1];
        return dir
          ? (JSON.parse(readFileSync(join(dir, 'cluster.json'), 'utf8')) as ClusterState)
          : undefined;
      },
      T,
    );
    return st;
  };
  return { child, out: () => out, exited, state };
}

interface Gap {
  name: string;
  measuredMs: number | null;
  baselineMs: number | null;
}
interface Timeline {
  gaps: Gap[];
  components: { name: string; real: boolean }[];
  events: { source: string; text: string }[];
}

/** client-go's acquire retry at its longest: RetryPeriod (2 s) + 1.2 · RetryPeriod, skupper's timings. */
const RETRY_MAX_MS = 4_400;

t.test(
  'make demo on real kubelets: installs, injects by rollout, drains, measures against baselines, reports, leaves nothing behind',
  async (t) => {
    const demo = startDemo();
    const st = await demo.state();
    const code = await demo.exited;
    const out = demo.out();
    t.equal(code, 0, out.slice(-4000));
    const last = out.trim().split('\n').at(-1) ?? '';
    const m = /^report: (\/\S+\.html)$/.exec(last);
    if (!m) throw new Error(`the last line is not "report: <absolute path>": ${last}`);
    const html = readFileSync(m[1] as string, 'utf8');
    t.match(html, /<svg[\s>]/, 'the report has an SVG timeline chart');
    t.match(html, /<td>MetalLB speaker<\/td><td>simulated<\/td>/);
    t.match(html, /<td>kubelet ×3 on containerd, runc, CNI bridge; kube-proxy<\/td><td>real<\/td>/);
    const timeline = JSON.parse(
      readFileSync(join(dirname(m[1] as string), 'timeline.json'), 'utf8'),
    ) as Timeline;
    const gap = (re: RegExp) => {
      const g = timeline.gaps.find((x) => re.test(x.name));
      if (!g) throw new Error(`no gap ${re} in the summary: ${timeline.gaps.map((x) => x.name).join('; ')}`);
      return g;
    };
    const dark = gap(/unanswered/);
    // Against the baseline measured in the same run (the lane shares two cores with the other):
    // without drainguard the VIP stays dark until MetalLB notices the speaker gone (seconds).
    t.ok(dark.baselineMs !== null && dark.baselineMs > 2000, `baseline dark ${dark.baselineMs} ms`);
    t.ok(
      dark.measuredMs !== null && dark.baselineMs !== null && dark.measuredMs * 4 < dark.baselineMs,
      `VIP dark ${dark.measuredMs} ms with drainguard vs ${dark.baselineMs} ms without`,
    );
    // drainguard's part is the Lease naming the successor; the successor then leads at its own
    // next try, which client-go's acquire loop makes RetryPeriod + rand·1.2·RetryPeriod (2–4.4 s)
    // after its last failed one (lab/sim/lease-candidate.ts). Asserted apart: a run whose Lease
    // was named in 1.35 s led at 5.1 s, beyond a quarter of the 19.5 s baseline (CI, 22af956).
    // A third, not a quarter: on Kubernetes 1.37 with both lanes on two cores the drained node's
    // pods starve while it drains (a liveness probe there timed out), and one run named the
    // successor 4.97 s after the stop against an 18.7 s baseline (the cluster flow: 0.8 s).
    const named = gap(/Lease names/);
    t.ok(
      named.measuredMs !== null && named.baselineMs !== null && named.measuredMs * 3 < named.baselineMs,
      `Lease names the successor ${named.measuredMs} ms after the leader stopped vs baseline ${named.baselineMs} ms`,
    );
    const leaderless = gap(/leaderless/);
    t.ok(
      leaderless.measuredMs !== null &&
        named.measuredMs !== null &&
        leaderless.measuredMs <= named.measuredMs + RETRY_MAX_MS + 1_000,
      `leaderless ${leaderless.measuredMs} ms: within the successor's next try (≤ ${RETRY_MAX_MS} ms) after the Lease named it`,
    );
    t.ok(
      leaderless.measuredMs !== null &&
        leaderless.baselineMs !== null &&
        leaderless.measuredMs * 2 < leaderless.baselineMs,
      `leaderless ${leaderless.measuredMs} ms vs baseline ${leaderless.baselineMs} ms`,
    );
    // The timeline was read from real components: the kubelet killing the evicted router, the
    // ReplicaSet controller re-creating it, drainguard's own Events.
    const sources = timeline.events.map((e) => `${e.source}: ${e.text}`);
    for (const re of [
      /Event from kubelet.*Killing/,
      /Event from replicaset-controller.*SuccessfulCreate/,
      /Event from drainguard/,
    ])
      t.ok(
        sources.some((s) => re.test(s)),
        `${re} in the timeline:\n${sources.join('\n')}`,
      );
    t.match(out, /drainguard\.io\/status/, 'the injection diff is shown');
    t.match(out, /reachable after the cleanup/, 'the netfilter step reached the pod with the reused IP');
    // Killed processes can outlive the demo by a moment (reaped once their parent has gone).
    await waitFor('nothing left behind', () => leftovers(st).length === 0, {
      timeoutMs: 30_000,
      intervalMs: 200,
    });
  },
);

t.test('make demo: Ctrl-C in the middle stops the cluster and prints no report', async (t) => {
  const demo = startDemo();
  const st = await demo.state();
  await waitFor('the demo installs drainguard', () => demo.out().includes('== 2.'), T);
  demo.child.kill('SIGINT');
  const code = await demo.exited;
  t.not(code, 0);
  t.ok(!demo.out().includes('report: '), 'an interrupted run prints no report');
  await waitFor('nothing left behind', () => leftovers(st).length === 0, {
    timeoutMs: 30_000,
    intervalMs: 200,
  });
});
