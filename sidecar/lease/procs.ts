// The leader container's processes as this sidecar sees them through a shared PID namespace
// (the webhook sets shareProcessNamespace for Lease profiles). The kubelet publishes a container's
// terminated state only once every container of a terminating pod has stopped, so while this
// sidecar runs the API cannot say that the leader stopped; its processes vanishing can.
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

/** How many processes of the container are visible here (0 when none, or none can be seen). */
export function countProcesses(id: string, proc = '/proc'): number {
  let n = 0;
  for (const e of readdirSync(proc)) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (inContainer(readFileSync(`${proc}/${e}/cgroup`, 'utf8'), id)) n++;
    } catch {
      // the process is gone, or hidden from us
    }
  }
  return n;
}
