// Removes everything a lab cluster made, synchronously (it also runs from a process 'exit' hook):
// processes by pid and by cgroup, the pods' network namespaces, mounts, node namespaces, routes,
// cgroup roots and the state directory. The state file is written before anything is created, so
// a cluster that failed half-way, or whose test process was killed, is removed just the same.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

export interface ClusterState {
  /** The process that owns the cluster; a detached cluster (`make cluster`) outlives it. */
  owner: number;
  detached: boolean;
  dir: string;
  /** Control plane state (etcd data, certificates) when kept apart from dir (tmpfs). */
  cpDir?: string;
  pids: number[];
  /** Network namespaces of the nodes and the switch. */
  netns: string[];
  /** Root-namespace routes to the pods' subnets, `ip route` arguments. */
  routes: string[][];
  /** The root namespace's link to the switch. */
  hostIf?: string;
  /** Cgroup roots of the nodes, one per v1 hierarchy. */
  cgroups: string[];
}

const run = (cmd: string, args: string[]) => {
  try {
    return execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'ignore'], encoding: 'utf8' });
  } catch {
    return '';
  }
};

const sleepMs = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Every pid in a cgroup directory tree. */
function cgroupPids(dir: string): number[] {
  const out: number[] = [];
  const walk = (d: string) => {
    let entries: string[];
    try {
      entries = readdirSync(d);
    } catch {
      return;
    }
    try {
      for (const l of readFileSync(join(d, 'cgroup.procs'), 'utf8').split('\n')) if (l) out.push(Number(l));
    } catch {}
    for (const e of entries) {
      const p = join(d, e);
      try {
        if (statSync(p).isDirectory()) walk(p);
      } catch {}
    }
  };
  walk(dir);
  return out;
}

/** Processes whose command line names the cluster's directory (containerd shims, CNI plugins). */
function pidsMentioning(dir: string): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${e}/cmdline`, 'utf8').includes(dir)) out.push(Number(e));
    } catch {}
  }
  return out;
}

/** /run/netns entries that are the network namespace of one of the given processes (pod sandboxes). */
function podNetnsOf(pids: number[]): string[] {
  const inodes = new Set<number>();
  for (const pid of pids) {
    try {
      inodes.add(statSync(`/proc/${pid}/ns/net`).ino);
    } catch {}
  }
  const out: string[] = [];
  if (!existsSync('/run/netns')) return out;
  for (const name of readdirSync('/run/netns')) {
    if (!name.startsWith('cni-')) continue;
    try {
      if (inodes.has(statSync(`/run/netns/${name}`).ino)) out.push(name);
    } catch {}
  }
  return out;
}

function killAll(pids: Iterable<number>): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
}

export function teardownCluster(st: ClusterState): void {
  // Pod sandboxes' namespaces are found through their processes, so look before killing.
  const inCgroups = st.cgroups.flatMap(cgroupPids);
  const podNetns = podNetnsOf(inCgroups);
  for (let round = 0; round < 50; round++) {
    const pids = new Set([
      ...st.pids.filter(alive),
      ...st.cgroups.flatMap(cgroupPids),
      ...pidsMentioning(st.dir),
    ]);
    if (pids.size === 0) break;
    killAll(pids);
    sleepMs(100);
  }
  // Mounts under the node directories (kubelet volumes, overlay rootfs, sandbox shm), deepest first.
  const mounts = run('findmnt', ['-rn', '-o', 'TARGET'])
    .split('\n')
    .map((m) => m.replace(/\\x20/g, ' '))
    .filter((m) => m.startsWith(`${st.dir}/`) || podNetns.some((n) => m === `/run/netns/${n}`))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) run('umount', ['-l', m]);
  for (const ns of [...podNetns, ...st.netns]) run('ip', ['netns', 'del', ns]);
  for (const r of st.routes) run('ip', ['route', 'del', ...r]);
  if (st.hostIf) run('ip', ['link', 'del', st.hostIf]);
  // Cgroups go bottom-up once empty (the kernel refuses a cgroup that still has tasks or children).
  for (const root of st.cgroups) {
    const dirs: string[] = [];
    const walk = (d: string) => {
      let entries: string[] = [];
      try {
        entries = readdirSync(d);
      } catch {
        return;
      }
      dirs.push(d);
      for (const e of entries) {
        try {
          if (statSync(join(d, e)).isDirectory()) walk(join(d, e));
        } catch {}
      }
    };
    walk(root);
    for (const d of dirs.reverse()) run('rmdir', [d]);
  }
  rmSync(st.dir, { recursive: true, force: true });
  if (st.cpDir) rmSync(st.cpDir, { recursive: true, force: true });
}

/** What is still there of a torn-down cluster (empty when it left nothing behind). */
export function leftovers(st: ClusterState): string[] {
  const out: string[] = [];
  const living = [...st.pids.filter(alive), ...pidsMentioning(st.dir)];
  if (living.length) out.push(`processes ${living.join(', ')}`);
  const names = existsSync('/run/netns') ? readdirSync('/run/netns') : [];
  for (const ns of st.netns) if (names.includes(ns)) out.push(`network namespace ${ns}`);
  for (const c of st.cgroups) if (existsSync(c)) out.push(`cgroup ${c}`);
  const mounts = run('findmnt', ['-rn', '-o', 'TARGET'])
    .split('\n')
    .filter((m) => m.startsWith(`${st.dir}/`));
  if (mounts.length) out.push(`mounts ${mounts.join(', ')}`);
  for (const d of [st.dir, st.cpDir]) if (d && existsSync(d)) out.push(`directory ${d}`);
  return out;
}
