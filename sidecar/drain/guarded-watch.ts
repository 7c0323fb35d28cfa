// The guarded container's stops while its pod stays, followed for the DrainWatcher (watcher.ts):
// the track (guarded.ts) looked at again when due, the container's processes polled where this
// sidecar sees them (procs.ts), each stop logged once.
import type { Clock } from '../../shared/clock.ts';
import type { ContainerStatus } from '../../shared/kube/types.ts';
import type { Logger } from '../../shared/log.ts';
import {
  GUARDED_REJOIN_MS,
  type GuardedTrack,
  guardedExited,
  guardedRecheckAt,
  guardedStopping,
  noGuardedTrack,
  trackGuarded,
} from './guarded.ts';
import { ContainerProcesses, type ProcFs, runtimeId } from './procs.ts';

/** How often the guarded container's processes are looked at while it runs (a few file reads). */
export const GUARDED_PROCS_POLL_MS = 100;

export interface GuardedWatchOptions {
  clock: Clock;
  log: Logger;
  /** The guarded container's name. */
  container: string | undefined;
  /** Where processes are read (tests: a fake /proc). */
  proc: { dir: string; fs?: ProcFs } | undefined;
  /** Aborted when the DrainWatcher stops: no more looks, no more polls. */
  signal: AbortSignal;
  /** The pod is going away (DrainWatcher.podGoing): that handover is the terminating one, not this. */
  podGoing: () => boolean;
  /** A look is due, or the processes are gone: the DrainWatcher recomputes its state. */
  changed: () => void;
}

export class GuardedWatch {
  private guarded: GuardedTrack = noGuardedTrack;
  /** When a look at the guarded track is scheduled (guardedRecheckAt). */
  private guardedRecheck: number | undefined;
  /** The stop last logged. */
  private guardedLogged: GuardedTrack['stopped'];
  /** The guarded container whose processes are watched (or found not visible: no poll). */
  private guardedProcs: { id: string; stop: AbortController | undefined } | undefined;
  private readonly o: GuardedWatchOptions;

  constructor(o: GuardedWatchOptions) {
    this.o = o;
  }

  /** The guarded container's stop, until a new one has served for GUARDED_REJOIN_MS. */
  get stopped(): GuardedTrack['stopped'] {
    return this.guarded.stopped;
  }

  /** The preStop hook of a container restart: the guarded container counts as stopped from now. */
  stopping(status: ContainerStatus | undefined, name: string): void {
    this.guarded = guardedStopping(this.guarded, status, name);
  }

  /** A look at the guarded container's status (the own Pod's, as last seen). */
  track(status: ContainerStatus | undefined): void {
    const going = this.o.podGoing();
    const now = this.o.clock.now();
    this.guarded = trackGuarded(this.guarded, status, going, now);
    const after = this.guarded.stopped;
    this.watchGuardedProcesses(status, going);
    const at = guardedRecheckAt(this.guarded);
    if (at !== undefined && at !== this.guardedRecheck) {
      this.guardedRecheck = at;
      void this.o.clock
        .sleep(Math.max(0, at - now), this.o.signal)
        .then(() => {
          if (this.o.signal.aborted) return;
          if (this.guardedRecheck === at) this.guardedRecheck = undefined;
          this.o.changed();
        })
        .catch(() => {});
    }
    // Logged once per stop, whichever way it was found (the process poll sets it before this runs;
    // the stop's record is replaced as it learns more, so not by identity).
    if (after && !this.guardedLogged)
      this.o.log.warn(
        { container: this.o.container, why: after.why },
        'the guarded container stopped while the pod stays: handing over as for a drain until a new one serves',
      );
    else if (this.guardedLogged && !after)
      this.o.log.info(
        { container: this.o.container },
        `a new guarded container has served for ${GUARDED_REJOIN_MS / 1000} s: taking the node back`,
      );
    this.guardedLogged = after;
  }

  /**
   * While the guarded container runs and no stop is known: its processes, if this sidecar sees
   * them (a shared PID namespace), polled every GUARDED_PROCS_POLL_MS; their going is a stop.
   */
  private watchGuardedProcesses(status: ContainerStatus | undefined, going: boolean): void {
    const id = runtimeId(status?.containerID);
    const wanted = !going && !this.guarded.stopped && status?.state?.running !== undefined ? id : undefined;
    if (this.guardedProcs?.id === wanted) return;
    this.guardedProcs?.stop?.abort();
    this.guardedProcs = undefined;
    if (wanted === undefined || status === undefined) return;
    const procs = new ContainerProcesses(wanted, {
      ...(this.o.proc ? { proc: this.o.proc.dir } : {}),
      ...(this.o.proc?.fs ? { fs: this.o.proc.fs } : {}),
    });
    let visible = 0;
    try {
      visible = procs.scan();
    } catch {
      // no /proc to read
    }
    // Not visible (no shared PID namespace, or gone already): the kubelet's status tells.
    if (visible === 0) {
      this.guardedProcs = { id: wanted, stop: undefined };
      return;
    }
    const stop = new AbortController();
    this.guardedProcs = { id: wanted, stop };
    const signal = AbortSignal.any([stop.signal, this.o.signal]);
    void (async () => {
      while (!signal.aborted) {
        await this.o.clock.sleep(GUARDED_PROCS_POLL_MS, signal);
        if (signal.aborted || !procs.gone()) continue;
        this.guarded = guardedExited(this.guarded, status, this.o.podGoing());
        this.o.changed();
        return;
      }
    })().catch(() => {});
  }
}
