// Whether a preStop hook taken for a deletion was a container restart after all, seen without the
// API. The kubelet runs the guarded container's preStop hook for a pod deletion and before it
// restarts the container after a failed liveness probe; /prestop tells them apart by reading the
// own Pod, and when that read fails (the sidecar's requests answered 429, the API down) it presumes
// a deletion (a VIP moved needlessly beats a dark one). Then the L2 fail-safe may fence the node
// and the speaker, restarted a second later and still the VIPs' owner (no memberlist cut while the
// pod goes away), announced behind the fence until the API answered again (issue 42, item 10:
// dark 11.3 s). Through the shared PID namespace the restart is plain: the guarded container's
// processes go, then processes of a container that was not there at the hook appear — and the
// kubelet never starts a container in a pod that is being deleted.
import type { Clock } from '../../shared/clock.ts';
import { ContainerProcesses, type ProcFs, visibleContainers } from './procs.ts';

/** How often the processes are looked at (a few file reads in a pod's PID namespace). */
export const WITNESS_POLL_MS = 100;

export interface WitnessOptions {
  /** The guarded container's runtime ID as last read (the hook's container). */
  guardedId: string;
  clock: Clock;
  /** Ends the watch (the presumption settled otherwise, the sidecar stopping). */
  signal: AbortSignal;
  /** Where processes are read (tests: a fake /proc). */
  proc?: { dir: string; fs?: ProcFs };
}

/**
 * Resolves true once the guarded container's processes are gone and another container's, not
 * visible when the watch began, are there: it was restarted, so the pod is not being deleted.
 * False when nothing can be seen (no shared PID namespace, the processes already gone) or when
 * the signal ends the watch first.
 */
export async function witnessRestart(o: WitnessOptions): Promise<boolean> {
  const where = { ...(o.proc ? { proc: o.proc.dir } : {}), ...(o.proc?.fs ? { fs: o.proc.fs } : {}) };
  const guarded = new ContainerProcesses(o.guardedId, where);
  const scan = () => visibleContainers(where.proc, where.fs);
  let before: Set<string>;
  try {
    if (guarded.scan() === 0) return false;
    before = scan();
  } catch {
    return false; // no /proc to read
  }
  let gone = false;
  while (!o.signal.aborted) {
    await o.clock.sleep(WITNESS_POLL_MS, o.signal);
    if (o.signal.aborted) break;
    try {
      gone ||= guarded.gone();
      if (gone && [...scan()].some((id) => !before.has(id))) return true;
    } catch {
      return false;
    }
  }
  return false;
}
