// Logs for the lab-cluster tests: a failing test carries the injected sidecars' logs and every
// component's; `follow` streams a container's log as the kubelet serves it.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Cluster } from '../../../lab/cluster/cluster.ts';

interface PodRef {
  metadata: { name: string };
  spec: { nodeName?: string };
}

/** Runs fn; on failure appends the drainguard sidecar logs of `sidecarsOf()`'s pods and the cluster's. */
export async function withLogs(
  c: Cluster,
  fn: () => Promise<void>,
  sidecarsOf?: { namespace: string; pods: () => Promise<PodRef[]> },
): Promise<void> {
  try {
    await fn();
  } catch (e) {
    let sidecars = '';
    if (sidecarsOf) {
      const pods = await sidecarsOf.pods().catch(() => []);
      const logs = await Promise.all(
        pods.map(async (p) => {
          const r = await c.kubectl([
            'logs',
            '-n',
            sidecarsOf.namespace,
            p.metadata.name,
            '-c',
            'drainguard',
            '--tail=40',
          ]);
          return `--- ${p.metadata.name} on ${p.spec.nodeName}: drainguard\n${r.stdout}`;
        }),
      );
      sidecars = `\n${logs.join('\n')}`;
    }
    (e as Error).message += `${sidecars}\n${c.logs(sidecarsOf ? 2000 : 3000)}`;
    throw e;
  }
}

/** A container's log lines, followed until it exits (kill proc to stop earlier). */
export function follow(
  c: Cluster,
  namespace: string,
  pod: string,
  container: string,
): { lines: string[]; proc: ChildProcess } {
  const proc = spawn(
    'kubectl',
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
