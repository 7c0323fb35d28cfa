// make bench-lease-procs: what the Lease sidecar's "has the leader container stopped?" check costs
// while it waits (every 25 ms), in a PID namespace shared with many processes
// (shareProcessNamespace on a busy pod). Baseline, measured in the same run: a full /proc scan per
// check (countProcesses, the check before). Measured: ContainerProcesses.gone(), which after one
// scan reads only the leader's own pids. Both on a synthetic /proc of PROCS processes (cgroup v1
// files of 13 lines, as on the lab cluster) and on this machine's real /proc. The same check
// watches an L2 speaker's guarded container (every GUARDED_PROCS_POLL_MS while it runs, on every
// node): its share of a CPU is printed too.
// Last line: one JSON object.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GUARDED_PROCS_POLL_MS } from '../../../sidecar/drain/guarded-watch.ts';
import { ContainerProcesses, countProcesses, inContainer } from '../../../sidecar/drain/procs.ts';

const PROCS = Number(process.env.LEASE_PROC_BENCH_PROCS ?? 2_000);
const LEADER_PROCS = 3;
const CHECK_INTERVAL_MS = 25;
const ID = 'd08c187c7c76802838851ecf3960b5436b217ec5509962b126f78d683ca7c40a';
const OTHER = '6a897dc87747731455fe23bef09d906294bf1dbe784501e3291ab762307e0748';

const cgroupV1 = (id: string) =>
  `${[
    'blkio',
    'cpu,cpuacct',
    'cpuset',
    'devices',
    'freezer',
    'hugetlb',
    'memory',
    'net_cls,net_prio',
    'perf_event',
    'pids',
    'rdma',
    'misc',
  ]
    .map((c, i) => `${13 - i}:${c}:/kubepods/burstable/pod0d85a1/${id}`)
    .join('\n')}\n1:name=systemd:/kubepods/burstable/pod0d85a1/${id}\n`;

function syntheticProc(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dg-proc-'));
  for (let pid = 1; pid <= PROCS; pid++) {
    mkdirSync(join(dir, String(pid)));
    writeFileSync(join(dir, String(pid), 'cgroup'), cgroupV1(pid <= LEADER_PROCS ? ID : OTHER));
  }
  for (const name of ['self', 'stat', 'meminfo']) mkdirSync(join(dir, name));
  return dir;
}

/** CPU µs per call of `check`, over enough calls to take about `ms` of CPU. */
function cpuPerCall(check: () => boolean, ms = 1_500): number {
  check();
  let calls = 0;
  const start = process.cpuUsage();
  let used = 0;
  while (used < ms * 1000) {
    for (let i = 0; i < 10; i++) check();
    calls += 10;
    const d = process.cpuUsage(start);
    used = d.user + d.system;
  }
  return used / calls;
}

function measure(label: string, proc: string, id: string, expectRunning: boolean) {
  const leader = new ContainerProcesses(id, { proc });
  leader.scan();
  const scanUs = cpuPerCall(() => countProcesses(id, proc) === 0);
  const trackedUs = cpuPerCall(() => leader.gone());
  if (expectRunning && leader.gone()) throw new Error(`${label}: the leader's processes were not found`);
  const pct = (us: number) => (us / (CHECK_INTERVAL_MS * 1000)) * 100;
  const procs = readdirSync(proc).filter((e) => /^\d+$/.test(e)).length;
  process.stdout.write(
    `${label.padEnd(16)} ${String(procs).padStart(6)} procs   full scan ${scanUs.toFixed(1).padStart(9)} µs/check (${pct(scanUs).toFixed(2)} % CPU at ${CHECK_INTERVAL_MS} ms)   known pids ${trackedUs.toFixed(1).padStart(7)} µs/check (${pct(trackedUs).toFixed(3)} % CPU)   ratio ${(trackedUs / scanUs).toFixed(4)}\n`,
  );
  return {
    procs,
    scanUs,
    trackedUs,
    ratio: trackedUs / scanUs,
    scanPct: pct(scanUs),
    trackedPct: pct(trackedUs),
  };
}

const dir = syntheticProc();
try {
  const synthetic = measure('synthetic /proc', dir, ID, true);
  // The real /proc: this process's own cgroup stands in for the leader container (its processes
  // are visible, as a shared PID namespace shows the leader's).
  const own = ownCgroupLeaf();
  const real = own ? measure('real /proc', '/proc', own, true) : undefined;
  const r = (n: number, d = 2) => Number(n.toFixed(d));
  process.stdout.write(
    `${JSON.stringify({
      bench: 'lease-leader-stop-check',
      interval_ms: CHECK_INTERVAL_MS,
      procs: synthetic.procs,
      leader_procs: LEADER_PROCS,
      baseline_full_scan_us: r(synthetic.scanUs, 1),
      known_pids_us: r(synthetic.trackedUs, 1),
      ratio: r(synthetic.ratio, 4),
      baseline_cpu_pct: r(synthetic.scanPct),
      known_pids_cpu_pct: r(synthetic.trackedPct, 3),
      // The L2 speaker's guarded container, polled with the same check while it runs.
      guarded_poll_ms: GUARDED_PROCS_POLL_MS,
      guarded_cpu_pct: r((synthetic.trackedUs / (GUARDED_PROCS_POLL_MS * 1000)) * 100, 4),
      ...(real
        ? {
            real_procs: real.procs,
            real_baseline_full_scan_us: r(real.scanUs, 1),
            real_known_pids_us: r(real.trackedUs, 1),
            real_ratio: r(real.ratio, 4),
            real_guarded_cpu_pct: r((real.trackedUs / (GUARDED_PROCS_POLL_MS * 1000)) * 100, 4),
          }
        : {}),
    })}\n`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}

/** The last component of this process's cgroup path (a container's ID in a pod), if it has one. */
function ownCgroupLeaf(): string | undefined {
  const text = readFileSync('/proc/self/cgroup', 'utf8');
  const leaf = text
    .split('\n')
    .map((line) => line.split(':').slice(2).join(':').split('/').pop())
    .find((l) => l);
  return leaf && inContainer(text, leaf) ? leaf : undefined;
}
