// The API objects the lab writes for the simulated MetalLB (the bed's L2 scene and the lab
// cluster): its configuration (IPAddressPool, L2Advertisement) and LoadBalancer Services whose
// endpoints are hand-made EndpointSlices (a Service without selector, so no controller manages
// them), in the API version the server has.
import { isApiError } from '../../../shared/kube/api-error.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { KubeObject } from '../../../shared/kube/types.ts';

export const SLICE_MANAGER = 'lab';

/** discovery.k8s.io/v1 where served (Kubernetes 1.21+), else v1beta1 (the lab's 1.20). */
export async function endpointSliceVersion(client: KubeClient): Promise<'v1' | 'v1beta1'> {
  try {
    await client.get('/apis/discovery.k8s.io/v1', { retries: 8 });
    return 'v1';
  } catch (e) {
    if (isApiError(e, 404)) return 'v1beta1';
    throw e;
  }
}

export const ipAddressPool = (name: string, namespace: string, addresses: string[]) => ({
  apiVersion: 'metallb.io/v1beta1',
  kind: 'IPAddressPool',
  metadata: { name, namespace },
  spec: { addresses },
});

/** An L2Advertisement without selectors: every pool, every node, all interfaces (MetalLB's usual). */
export const l2Advertisement = (name: string, namespace: string) => ({
  apiVersion: 'metallb.io/v1beta1',
  kind: 'L2Advertisement',
  metadata: { name, namespace },
});

/** The Service's one EndpointSlice: a ready endpoint per node (the node's address, port 8080). */
export function endpointSlice(
  version: 'v1' | 'v1beta1',
  svc: { name: string; namespace: string },
  endpoints: { node: string; ip: string }[],
) {
  return {
    apiVersion: `discovery.k8s.io/${version}`,
    kind: 'EndpointSlice',
    metadata: {
      name: `${svc.name}-lab`,
      namespace: svc.namespace,
      labels: {
        'kubernetes.io/service-name': svc.name,
        'endpointslice.kubernetes.io/managed-by': SLICE_MANAGER,
      },
    },
    addressType: 'IPv4',
    ports: [{ name: '', port: 8080, protocol: 'TCP' }],
    endpoints: endpoints.map((e) => ({
      addresses: [e.ip],
      conditions: { ready: true },
      // v1beta1 on 1.20 keeps nodeName only behind a feature gate (EndpointSliceNodeName); the
      // hostname topology key is what 1.20's own EndpointSlice controller writes.
      ...(version === 'v1' ? { nodeName: e.node } : { topology: { 'kubernetes.io/hostname': e.node } }),
    })),
  };
}

/** A LoadBalancer Service without selector, `vip` as its address (the MetalLB controller's part). */
export function loadBalancerService(opts: { name: string; namespace: string; local?: boolean }) {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: opts.name, namespace: opts.namespace },
    spec: {
      type: 'LoadBalancer',
      ports: [{ port: 80, targetPort: 8080 }],
      ...(opts.local ? { externalTrafficPolicy: 'Local' } : {}),
    },
  };
}

/** Creates the object, or replaces it if it exists. */
export async function upsert(client: KubeClient, collection: string, body: KubeObject): Promise<void> {
  try {
    await client.create(collection, body, { retries: 3 });
  } catch (e) {
    if (!isApiError(e, 409)) throw e;
    const path = `${collection}/${body.metadata?.name}`;
    const cur = await client.get<KubeObject>(path);
    await client.replace(path, {
      ...body,
      metadata: { ...body.metadata, resourceVersion: cur.metadata?.resourceVersion },
    });
  }
}

/**
 * A LoadBalancer Service with `vip` as its ingress address (several for a dual-stack Service, the
 * first one elected on) and ready endpoints on `endpoints` (created or replaced), as MetalLB's
 * speakers would find it.
 */
export async function putLoadBalancer(
  client: KubeClient,
  opts: {
    name: string;
    namespace: string;
    vip: string | readonly string[];
    local?: boolean;
    endpoints: { node: string; ip: string }[];
  },
): Promise<void> {
  const svcPath = `/api/v1/namespaces/${opts.namespace}/services`;
  await upsert(client, svcPath, loadBalancerService(opts));
  const svc = await client.get<KubeObject>(`${svcPath}/${opts.name}`);
  await client.replace(`${svcPath}/${opts.name}/status`, {
    ...svc,
    status: { loadBalancer: { ingress: [opts.vip].flat().map((ip) => ({ ip })) } },
  });
  await putEndpoints(client, opts);
}

/** Replaces the Service's EndpointSlice: one ready endpoint per given node. */
export async function putEndpoints(
  client: KubeClient,
  opts: { name: string; namespace: string; endpoints: { node: string; ip: string }[] },
): Promise<void> {
  const version = await endpointSliceVersion(client);
  await upsert(
    client,
    `/apis/discovery.k8s.io/${version}/namespaces/${opts.namespace}/endpointslices`,
    endpointSlice(version, opts, opts.endpoints),
  );
}

/** MetalLB's configuration for the lab: one pool `name` over `addresses`, one L2Advertisement for all. */
export async function putL2Config(
  client: KubeClient,
  namespace: string,
  addresses: string[],
  name = 'lab',
): Promise<void> {
  const base = `/apis/metallb.io/v1beta1/namespaces/${namespace}`;
  await upsert(client, `${base}/ipaddresspools`, ipAddressPool(name, namespace, addresses));
  await upsert(client, `${base}/l2advertisements`, l2Advertisement(name, namespace));
}

/** Waits until the API server serves these metallb.io/v1beta1 resources (CRDs just applied). */
export async function waitForMetalLbResources(
  client: KubeClient,
  resources: string[],
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const list = await client.get<{ resources?: { name: string }[] }>('/apis/metallb.io/v1beta1');
      const served = new Set((list.resources ?? []).map((r) => r.name));
      if (resources.every((r) => served.has(r))) return;
    } catch (e) {
      if (!isApiError(e, 404) && !isApiError(e, 503)) throw e;
    }
    if (Date.now() > deadline)
      throw new Error(`metallb.io/v1beta1 ${resources.join(', ')} not served after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
