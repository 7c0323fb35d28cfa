// The injected pods the cluster suites look at, as `kubectl get pods -o json` shows them.
import type { Cluster } from '../../../lab/cluster/cluster.ts';

export interface Pod {
  metadata: { name: string; uid: string; deletionTimestamp?: string };
  spec: { nodeName?: string; containers: { name: string }[] };
  status?: { containerStatuses?: { name: string; ready: boolean }[] };
}

/** The pods of `namespace` that match the label `selector`. */
export async function podsOf(c: Cluster, namespace: string, selector: string): Promise<Pod[]> {
  const out = await c.k(['get', 'pods', '-n', namespace, '-l', selector, '-o', 'json']);
  return (JSON.parse(out) as { items: Pod[] }).items;
}

/** The pod carries drainguard's sidecar, and all its `containers` containers are Ready. */
export function injectedAndReady(p: Pod, containers: number): boolean {
  const statuses = p.status?.containerStatuses ?? [];
  return (
    p.spec.containers.some((x) => x.name === 'drainguard') &&
    statuses.length === containers &&
    statuses.every((s) => s.ready)
  );
}
