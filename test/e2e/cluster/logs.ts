// Logs for the lab-cluster tests: a failing test carries the injected sidecars' logs and every
// component's. Following a container's log lives in lab/cluster/logs.ts.
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
