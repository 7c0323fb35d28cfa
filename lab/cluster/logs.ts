// Container logs as the kubelet serves them (`kubectl logs -f`), for tests, benchmarks and the
// demo: the simulators print JSON lines ({"ev", "t", …}) timed by their own clock.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { kubectlBinary } from '../versions.ts';
import type { Cluster } from './cluster.ts';

/** A container's log lines, followed until it exits (kill proc to stop earlier). */
export function follow(
  c: Cluster,
  namespace: string,
  pod: string,
  container: string,
): { lines: string[]; proc: ChildProcess } {
  const proc = spawn(
    kubectlBinary(),
    ['--kubeconfig', c.kubeconfigPath, 'logs', '-f', '-n', namespace, pod, '-c', container],
    {
      stdio: ['ignore', 'pipe', 'ignore'],
    },
  );
  const lines: string[] = [];
  createInterface({ input: proc.stdout! }).on('line', (l) => lines.push(l));
  return { lines, proc };
}

/** A container's JSON log lines (the simulators' `{"ev", "t", …}` events), followed as above. */
export function followEvents<E = { ev: string; t: number }>(
  c: Cluster,
  namespace: string,
  pod: string,
  container: string,
): { lines: string[]; proc: ChildProcess; readonly events: E[] } {
  const f = follow(c, namespace, pod, container);
  return {
    ...f,
    get events(): E[] {
      return f.lines.flatMap((l) => {
        try {
          return [JSON.parse(l) as E];
        } catch {
          return [];
        }
      });
    },
  };
}
