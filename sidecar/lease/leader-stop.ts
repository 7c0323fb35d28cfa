// The leader container's stop, as the Lease handover must see it before it touches the Lease:
// its status in the own Pod, or — sooner — its processes gone from the shared PID namespace.
import { ContainerProcesses, runtimeId } from '../drain/procs.ts';
import type { FeatureContext } from '../feature.ts';
import { containerPhase, leaderStopped } from './core.ts';

/** Whether, and when, the leader container was seen stopped. */
export type LeaderStop = { stopped: boolean; at: number };

export class LeaderWatch {
  private readonly ctx: FeatureContext;
  /** Aborted when the feature stops. */
  private readonly signal: AbortSignal;
  /** The leader container's processes once they were seen here (shared PID namespace). */
  private localLeader: ContainerProcesses | undefined;

  constructor(ctx: FeatureContext, signal: AbortSignal) {
    this.ctx = ctx;
    this.signal = signal;
  }

  private leaderId(container: string): string | undefined {
    const pod = this.ctx.drain.pod;
    const status = [
      ...(pod?.status?.containerStatuses ?? []),
      ...(pod?.status?.initContainerStatuses ?? []),
    ].find((c) => c.name === container);
    return runtimeId(status?.containerID);
  }

  /** Looks up the leader container's processes every second (not while `paused`: a handover waits on them). */
  async watch(container: string, paused: () => boolean): Promise<void> {
    while (!this.signal.aborted) {
      // Not while a handover waits on them; after one, a restarted leader is looked up again.
      const id = paused() ? undefined : this.leaderId(container);
      if (id && id !== this.localLeader?.id) {
        const procs = new ContainerProcesses(id);
        if (procs.scan() > 0) {
          if (this.localLeader === undefined)
            this.ctx.log.info({ container }, 'leader container processes visible: its stop is seen locally');
          this.localLeader = procs;
        }
      }
      await this.ctx.clock.sleep(1_000, this.signal).catch(() => {});
    }
  }

  /** Until the leader container is seen stopped (its status, or its processes gone), or the deadline. */
  async waitStopped(container: string, deadline: number): Promise<LeaderStop> {
    const clock = this.ctx.clock;
    let lastLog = 0;
    while (clock.now() < deadline && !this.signal.aborted) {
      if (this.ctx.drain.current.podReplaced) return { stopped: false, at: clock.now() };
      const phase = containerPhase(this.ctx.drain.pod, container);
      if (leaderStopped(phase)) return { stopped: true, at: clock.now() };
      // Reads only the leader's known pids (ContainerProcesses), not all of a shared /proc.
      const id = this.leaderId(container);
      if (id !== undefined && id === this.localLeader?.id && this.localLeader.gone()) {
        this.ctx.log.info({ container }, 'leader container processes gone: it has stopped');
        return { stopped: true, at: clock.now() };
      }
      if (clock.now() - lastLog > 5_000) {
        lastLog = clock.now();
        this.ctx.log.info(
          { container, phase },
          'waiting for the leader container to stop before touching the Lease',
        );
      }
      await clock.sleep(25, this.signal);
    }
    return { stopped: false, at: clock.now() };
  }
}
