// The injected pods the cluster suites look at, as `kubectl get pods -o json` shows them. The
// sidecar is a native one (a restartable init container) on kubelets that have them, which every
// kubelet of the supported range does; a classic one (a plain container) otherwise.
import type { Cluster } from './cluster.ts';

export interface ContainerStatus {
  name: string;
  ready: boolean;
  restartCount?: number;
  state?: { running?: object; terminated?: object; waiting?: object };
}

export interface Pod {
  metadata: {
    name: string;
    uid: string;
    deletionTimestamp?: string;
    annotations?: Record<string, string>;
  };
  spec: {
    nodeName?: string;
    containers: { name: string }[];
    initContainers?: { name: string; restartPolicy?: string }[];
  };
  status?: { containerStatuses?: ContainerStatus[]; initContainerStatuses?: ContainerStatus[] };
}

/** The pods of `namespace` that match the label `selector`. */
export async function podsOf(c: Cluster, namespace: string, selector: string): Promise<Pod[]> {
  const out = await c.k(['get', 'pods', '-n', namespace, '-l', selector, '-o', 'json']);
  return (JSON.parse(out) as { items: Pod[] }).items;
}

/** What runningStatuses needs of a pod: its init containers and its statuses. */
interface PodStatuses<S extends { name: string }> {
  spec: { initContainers?: { name: string; restartPolicy?: string }[] };
  status?: { containerStatuses?: S[]; initContainerStatuses?: S[] };
}

const restartable = (p: PodStatuses<{ name: string }>) =>
  new Set((p.spec.initContainers ?? []).filter((x) => x.restartPolicy === 'Always').map((x) => x.name));

/** How drainguard's sidecar sits in the pod: native, classic, or not there. */
export function sidecarMode(p: Pod): 'native' | 'classic' | undefined {
  if (restartable(p).has('drainguard')) return 'native';
  if (p.spec.containers.some((x) => x.name === 'drainguard')) return 'classic';
  return undefined;
}

/** The statuses of every container that runs for the pod's life: its containers and native sidecars. */
export function runningStatuses<S extends { name: string }>(p: PodStatuses<S>): S[] {
  const sidecars = restartable(p);
  return [
    ...(p.status?.containerStatuses ?? []),
    ...(p.status?.initContainerStatuses ?? []).filter((s) => sidecars.has(s.name)),
  ];
}

/** The sidecar's own status, wherever the mode puts it. */
export const sidecarStatus = (p: Pod): ContainerStatus | undefined =>
  runningStatuses(p).find((s) => s.name === 'drainguard');

/** The pod carries drainguard's sidecar, and all its `containers` containers (sidecar included) are Ready. */
export function injectedAndReady(p: Pod, containers: number): boolean {
  const statuses = runningStatuses(p);
  return sidecarMode(p) !== undefined && statuses.length === containers && statuses.every((s) => s.ready);
}
