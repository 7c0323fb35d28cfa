// A container's processes as this sidecar sees them through a shared PID namespace (the webhook
// sets shareProcessNamespace for the Lease and L2 handovers). The Lease handover: the kubelet
// publishes a container's terminated state only once every container of a terminating pod has
// stopped, so while this sidecar runs the API cannot say that the leader stopped; its processes
// vanishing can. The L2 handover: a speaker killed while its pod stays is seen gone at once, not
// at the kubelet's next status update (drain/guarded.ts).
import { readdirSync, readFileSync } from 'node:fs';

/** The runtime's ID from a containerStatus.containerID such as `containerd://<64 hex>`. */
export function runtimeId(containerID: string | undefined): string | undefined {
  const m = /^[a-z0-9-]+:\/\/([0-9a-f]{12,})$/.exec(containerID ?? '');
  return m?.[1];
}

/**
 * Whether a /proc/<pid>/cgroup text puts the process in the container with this ID. Every runtime
 * and cgroup driver names the container's own cgroup after its ID (cgroupfs `/…/pod<uid>/<id>`,
 * systemd `cri-containerd-<id>.scope`, `crio-<id>.scope`), also seen through a cgroup namespace
 * (`/../<id>`).
 */
export function inContainer(cgroupText: string, id: string): boolean {
  return cgroupText.split('\n').some((line) => {
    const path = line.split(':').slice(2).join(':');
    const last = path.split('/').pop() ?? '';
    return (
      last === id ||
      last === `cri-containerd-${id}.scope` ||
      last === `crio-${id}.scope` ||
      last === `docker-${id}.scope`
    );
  });
}

/** The runtime's ID named by the last segment of a cgroup path (`<id>`, `cri-containerd-<id>.scope` …). */
const CGROUP_CONTAINER = /^(?:cri-containerd-|crio-|docker-)?([0-9a-f]{12,})(?:\.scope)?$/;

/** The container a /proc/<pid>/cgroup text puts the process in (inContainer's forms), if any. */
export function containerIdOf(cgroupText: string): string | undefined {
  for (const line of cgroupText.split('\n')) {
    const last = line.split(':').slice(2).join(':').split('/').pop() ?? '';
    const m = CGROUP_CONTAINER.exec(last);
    if (m) return m[1];
  }
  return undefined;
}

/** The two reads a /proc scan needs (tests count them). */
export interface ProcFs {
  readdir(dir: string): string[];
  readFile(path: string): string;
}

const hostProc: ProcFs = { readdir: (d) => readdirSync(d), readFile: (p) => readFileSync(p, 'utf8') };

/** Whether /proc/<pid> is (still) a process of the container; false once it is gone or hidden. */
function pidIn(proc: string, pid: string, id: string, fs: ProcFs): boolean {
  try {
    return inContainer(fs.readFile(`${proc}/${pid}/cgroup`), id);
  } catch {
    return false; // the process is gone, or hidden from us
  }
}

/** The container's processes visible here: a full /proc scan. */
export function containerPids(id: string, proc = '/proc', fs: ProcFs = hostProc): string[] {
  return fs.readdir(proc).filter((e) => /^\d+$/.test(e) && pidIn(proc, e, id, fs));
}

/** The containers whose processes are visible here (a shared PID namespace: the pod's). */
export function visibleContainers(proc = '/proc', fs: ProcFs = hostProc): Set<string> {
  const ids = new Set<string>();
  for (const e of fs.readdir(proc)) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const id = containerIdOf(fs.readFile(`${proc}/${e}/cgroup`));
      if (id) ids.add(id);
    } catch {
      // gone meanwhile, or hidden
    }
  }
  return ids;
}

/** How many processes of the container are visible here (0 when none, or none can be seen). */
export function countProcesses(id: string, proc = '/proc'): number {
  return containerPids(id, proc).length;
}

/**
 * One container's processes, followed by pid. The leader-stop check runs every 25 ms, and a full
 * /proc scan reads one file per process of the pod (shareProcessNamespace: all of a busy pod's):
 * after one scan each check reads only the known pids' cgroup files (a pid re-used by another
 * container does not count), and scans again only once none of them is left (a process started
 * since the last scan keeps the container running).
 */
export class ContainerProcesses {
  readonly id: string;
  private pids: string[] = [];
  private readonly proc: string;
  private readonly fs: ProcFs;

  constructor(id: string, opts: { proc?: string; fs?: ProcFs } = {}) {
    this.id = id;
    this.proc = opts.proc ?? '/proc';
    this.fs = opts.fs ?? hostProc;
  }

  /** A full scan; how many processes it found. */
  scan(): number {
    this.pids = containerPids(this.id, this.proc, this.fs);
    return this.pids.length;
  }

  /** Whether no process of the container is left. */
  gone(): boolean {
    this.pids = this.pids.filter((pid) => pidIn(this.proc, pid, this.id, this.fs));
    return this.pids.length === 0 && this.scan() === 0;
  }
}
