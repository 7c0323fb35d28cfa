// The guarded container (the speaker) stopped while its pod stays: a liveness or startup probe
// failure (the kubelet runs the preStop hook, then kills it), a crash, an OOM kill, a SIGKILL. The
// node then answers for nothing it owns until the kubelet has restarted it — at once the first
// time, after a back-off of 10 s, 20 s, … up to 5 min after that — and MetalLB's peers take over
// only once memberlist declares the speaker dead (~5 s; facts.md). Handing over for that time, as
// for a drain, keeps the VIPs answered; the node is taken back once a new container has served
// for GUARDED_REJOIN_MS.
// Pure: the own Pod's guarded container status and the time in, what is stopped out
// (drain/guarded-watch.ts feeds it).
import type { ContainerStatus } from '../../shared/kube/types.ts';

/**
 * A new container must have served this long before the node is taken back. A restarted speaker
 * joins memberlist anew; taken back before it has, it would elect itself for every VIP while its
 * peers still announce them (the same wait as after a memberlist cut, l2/handover/model.ts REJOIN_MS). It
 * also keeps a crash-looping speaker that is ready for a moment from moving the VIPs back and
 * forth at every back-off.
 */
export const GUARDED_REJOIN_MS = 10_000;

export interface GuardedStop {
  /** The runtime ID of the container that stopped (or is about to); undefined: any serving one replaces it. */
  id: string | undefined;
  /** Its restartCount: a new container has a higher one. */
  restartCount: number;
  why: string;
  /** The hook came before any status was read: the first one read names the stopping container. */
  adopt?: boolean;
  /** Since when a new container serves (running and ready), uninterrupted. */
  newServingSince?: number;
}

export interface GuardedTrack {
  /** The container last seen serving (running and ready): only its stop counts. */
  up: { id: string | undefined; restartCount: number } | undefined;
  /** Set from the stop until a new container has served for GUARDED_REJOIN_MS. */
  stopped: GuardedStop | undefined;
}

export const noGuardedTrack: GuardedTrack = { up: undefined, stopped: undefined };

const serving = (s: ContainerStatus): boolean => s.state?.running !== undefined && s.ready === true;
const upOf = (s: ContainerStatus) => ({ id: s.containerID, restartCount: s.restartCount ?? 0 });

/**
 * The next track from the own Pod's status of the guarded container at `now`. `podGoing`: the pod
 * is being deleted or terminates (that handover is the terminating one, not this). A container
 * never seen serving by this sidecar is a stop only if it is not running after restarts (this
 * sidecar restarted meanwhile; not while the pod starts); a readiness flap of the same container
 * is none (MetalLB's speaker announces whatever its readiness says).
 */
export function trackGuarded(
  track: GuardedTrack,
  status: ContainerStatus | undefined,
  podGoing: boolean,
  now: number,
): GuardedTrack {
  const { stopped } = track;
  if (stopped) {
    if (status === undefined) return track;
    if (stopped.adopt)
      return { ...track, stopped: { ...stopped, ...upOf(status), adopt: false, newServingSince: undefined } };
    const replaced =
      stopped.id === undefined ||
      status.containerID !== stopped.id ||
      (status.restartCount ?? 0) > stopped.restartCount;
    if (!serving(status) || !replaced)
      return stopped.newServingSince === undefined
        ? track
        : { ...track, stopped: { ...stopped, newServingSince: undefined } };
    const since = stopped.newServingSince ?? now;
    if (now - since >= GUARDED_REJOIN_MS) return { up: upOf(status), stopped: undefined };
    return since === stopped.newServingSince
      ? track
      : { ...track, stopped: { ...stopped, newServingSince: since } };
  }
  if (status === undefined) return track;
  if (serving(status)) return { up: upOf(status), stopped };
  const { up } = track;
  if (podGoing) return track;
  const running = status.state?.running !== undefined;
  if (up === undefined) {
    const restarts = status.restartCount ?? 0;
    return restarts > 0 && !running
      ? {
          up,
          stopped: {
            id: undefined,
            restartCount: -1,
            why: `container ${status.name} not running after ${restarts} restart(s)`,
          },
        }
      : track;
  }
  const restarted = status.containerID !== up.id || (status.restartCount ?? 0) > up.restartCount;
  if (running && !restarted) return track; // not ready: a flap
  return {
    up,
    stopped: {
      id: up.id,
      restartCount: up.restartCount,
      why: `container ${status.name} ${restarted && running ? 'restarted, not ready yet' : 'stopped'}`,
    },
  };
}

/**
 * When a new container serving would end the stop (GUARDED_REJOIN_MS after it began serving), or
 * undefined: nothing to wait for. The watcher looks again then.
 */
export function guardedRecheckAt(track: GuardedTrack): number | undefined {
  const since = track.stopped?.newServingSince;
  return since === undefined ? undefined : since + GUARDED_REJOIN_MS;
}

/** The preStop hook of a container restart: the container is about to be killed. */
export function guardedStopping(
  track: GuardedTrack,
  status: ContainerStatus | undefined,
  name: string,
): GuardedTrack {
  if (track.stopped) return track;
  return {
    up: track.up,
    stopped: {
      id: status?.containerID ?? track.up?.id,
      restartCount: status?.restartCount ?? track.up?.restartCount ?? 0,
      why: `container ${name} restarting (preStop hook)`,
      ...(status === undefined && track.up === undefined ? { adopt: true } : {}),
    },
  };
}

/**
 * The container's processes are gone (seen through a shared PID namespace, drain/procs.ts): it
 * stopped, whatever the API says yet. `status` is the one whose processes were watched.
 */
export function guardedExited(track: GuardedTrack, status: ContainerStatus, podGoing: boolean): GuardedTrack {
  if (track.stopped || podGoing) return track;
  return {
    up: track.up,
    stopped: {
      id: status.containerID,
      restartCount: status.restartCount ?? 0,
      why: `container ${status.name} exited`,
    },
  };
}
