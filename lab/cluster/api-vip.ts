// The HA lab's API VIP, served by MetalLB L2 (issue 23's setup): a LoadBalancer Service
// kube-system/kube-apiserver-vip on 6443 whose endpoints are the control-plane nodes' API servers,
// `externalTrafficPolicy: Local` (the node that announces the VIP serves it with its own API
// server: only control-plane nodes are candidates), announced by the speaker simulator on every
// node. The EndpointSlice is written by hand and never updated — as with an API server that runs
// as a static pod whose readiness its node can no longer report (its own API server is the stale
// one), the cluster keeps seeing every endpoint ready. The management cluster's view is a client
// namespace on the switch with a kubeconfig naming the VIP (the serving certificate has it).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeObject } from '../../shared/kube/types.ts';
import { kubeconfigJson } from '../bed/control-plane.ts';
import { endpointSlice, endpointSliceVersion, loadBalancerService, upsert } from '../sim/speaker/objects.ts';
import type { Cluster } from './cluster.ts';
import { API_PORT } from './ha-control-plane.ts';

export const API_VIP_SERVICE = { name: 'kube-apiserver-vip', namespace: 'kube-system' } as const;

/**
 * The Service with `c.ha.apiVip` as its address and the control-plane API servers as its ready
 * endpoints. The speakers (lab/cluster/metallb.ts installSpeakers) announce it.
 */
export async function installApiVip(c: Cluster): Promise<void> {
  const ha = c.ha;
  if (!ha)
    throw new Error(
      'installApiVip: the cluster has no HA control plane (startCluster({ controlPlanes: 3 }))',
    );
  const client = c.client();
  try {
    const svc = loadBalancerService({ ...API_VIP_SERVICE, local: true });
    const port = { name: 'https', port: API_PORT, targetPort: API_PORT, protocol: 'TCP' };
    const svcPath = `/api/v1/namespaces/${API_VIP_SERVICE.namespace}/services`;
    await upsert(client, svcPath, { ...svc, spec: { ...svc.spec, ports: [port] } } as KubeObject);
    const current = await client.get<KubeObject>(`${svcPath}/${API_VIP_SERVICE.name}`);
    // MetalLB's controller's part: the address, from the lab pool.
    await client.replace(`${svcPath}/${API_VIP_SERVICE.name}/status`, {
      ...current,
      status: { loadBalancer: { ingress: [{ ip: ha.apiVip }] } },
    });
    const version = await endpointSliceVersion(client);
    const slice = endpointSlice(
      version,
      API_VIP_SERVICE,
      ha.members.map((m) => ({ node: m.name, ip: m.ip })),
    );
    await upsert(
      client,
      `/apis/discovery.k8s.io/${version}/namespaces/${API_VIP_SERVICE.namespace}/endpointslices`,
      { ...slice, ports: [{ name: 'https', port: API_PORT, protocol: 'TCP' }] } as KubeObject,
    );
  } finally {
    client.close();
  }
}

/** An admin kubeconfig naming the VIP (what the management cluster uses). */
export function vipKubeconfig(c: Cluster): string {
  const ha = c.ha;
  if (!ha) throw new Error('vipKubeconfig: the cluster has no HA control plane');
  const p = join(ha.dir, 'kubeconfig-vip.json');
  writeFileSync(
    p,
    kubeconfigJson(`https://${ha.apiVip}:${API_PORT}`, ha.target.ca ?? '', 'admin', ha.target.token ?? ''),
    { mode: 0o600 },
  );
  return p;
}
