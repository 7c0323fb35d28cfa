// Pods and Node objects → the plain inputs of the decision. Pure.
import type { Node, Pod } from '../../shared/kube/types.ts';
import type { PodInfo } from './decide.ts';

/**
 * Pods of this node that hold (or will hold) pod-network IPs: hostNetwork pods carry the
 * node's addresses, and Succeeded/Failed pods have given their IPs back (they may be reused),
 * so both are skipped. Terminating pods still hold their IPs and count.
 */
function* podNetworkPods(pods: Iterable<Pod>, nodeName?: string): Generator<Pod> {
  for (const p of pods) {
    if (nodeName && p.spec?.nodeName !== nodeName) continue;
    if (p.spec?.hostNetwork) continue;
    const phase = p.status?.phase;
    if (phase === 'Succeeded' || phase === 'Failed') continue;
    yield p;
  }
}

const ipsOf = (p: Pod): string[] => {
  const ips = new Set<string>();
  for (const i of p.status?.podIPs ?? []) if (i?.ip) ips.add(i.ip);
  if (p.status?.podIP) ips.add(p.status.podIP);
  return [...ips];
};

/** Current pods of this node with their own IPs. */
export function podInfos(pods: Iterable<Pod>, nodeName?: string): PodInfo[] {
  const out: PodInfo[] = [];
  for (const p of podNetworkPods(pods, nodeName)) {
    const ips = ipsOf(p);
    if (ips.length) out.push({ namespace: p.metadata?.namespace ?? '', name: p.metadata?.name ?? '', ips });
  }
  return out;
}

/**
 * Pods of this node that a CNI may already have wired but whose IP the kubelet has not yet
 * written (CNI ADD runs before the status update). Their rules look like nobody's, so a pass
 * must not delete rules that appeared after such a pod did. Keyed by UID (or namespace/name).
 */
export function podsAwaitingIp(pods: Iterable<Pod>, nodeName?: string): string[] {
  const out: string[] = [];
  for (const p of podNetworkPods(pods, nodeName))
    if (ipsOf(p).length === 0)
      out.push(p.metadata?.uid ?? `${p.metadata?.namespace ?? ''}/${p.metadata?.name ?? ''}`);
  return out;
}

/** InternalIP/ExternalIP of the Node (hostnames and DNS names are not addresses a rule can carry). */
export function nodeAddresses(node: Node | undefined): string[] {
  return (node?.status?.addresses ?? [])
    .filter((a) => a.type === 'InternalIP' || a.type === 'ExternalIP')
    .map((a) => a.address);
}

/** A PodList as `kubectl get pods -o json` writes it (also accepts a bare array of pods). */
export function parsePodList(text: string, source: string): Pod[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new Error(
      `${source}: not JSON (${(e as Error).message}); expected the output of kubectl get pods -o json`,
    );
  }
  const items = Array.isArray(doc) ? doc : (doc as { items?: unknown })?.items;
  if (!Array.isArray(items))
    throw new Error(`${source}: expected a PodList with "items" (kubectl get pods -o json)`);
  return items as Pod[];
}
