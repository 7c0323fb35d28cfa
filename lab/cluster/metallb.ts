// MetalLB's L2 side on the lab cluster as its own manifests lay it out: the speaker DaemonSet
// (hostNetwork, NET_RAW, app=metallb component=speaker, service account speaker) whose container
// is the speaker simulator from the lab image — MetalLB's Go binary cannot be built here — its
// configuration (an IPAddressPool `lab` over <segment>.100–.199, the addresses the demo picks its
// VIP from, and an L2Advertisement `lab` for every node), and a LoadBalancer Service whose address
// the controller's part (done here) puts on the switch, with a ready endpoint on every node.
import { putL2Config, putLoadBalancer, waitForMetalLbResources } from '../sim/speaker/objects.ts';
import type { Cluster } from './cluster.ts';
import { LAB_POOL_HOSTS } from './pool.ts';

const NS = 'metallb-system';

export { LAB_POOL_HOSTS } from './pool.ts';

/** Installs the speakers (injected when opts.inject: the namespace is labelled first) and the Service. */
export async function installMetalLbL2(c: Cluster, vip: string, opts: { inject: boolean }): Promise<void> {
  await installSpeakers(c, opts);
  await installLoadBalancer(c, vip);
}

/** MetalLB's configuration and the speaker DaemonSet with its grants, rolled out on every node. */
export async function installSpeakers(c: Cluster, opts: { inject: boolean }): Promise<void> {
  const k = (args: string[], input?: string) => c.k(args, input === undefined ? {} : { input });
  // The CRDs come with installMetalLbBase (lab/cluster/install.ts); served before objects are written.
  const client = c.client();
  try {
    await waitForMetalLbResources(client, ['ipaddresspools', 'l2advertisements']);
    await putL2Config(client, NS, [`${c.bed.addr4(LAB_POOL_HOSTS[0])}-${c.bed.addr4(LAB_POOL_HOSTS[1])}`]);
  } finally {
    client.close();
  }
  // What MetalLB's own manifests grant the speaker, narrowed to what the simulator reads and writes
  // (EndpointSlices in whichever version the server has: RBAC does not tell versions apart).
  await k([
    'create',
    'clusterrole',
    'lab-speaker',
    '--verb=get,list,watch',
    '--resource=nodes,services,endpointslices.discovery.k8s.io',
  ]);
  await k([
    'create',
    'clusterrolebinding',
    'lab-speaker',
    '--clusterrole=lab-speaker',
    `--serviceaccount=${NS}:speaker`,
  ]);
  await k(
    ['apply', '-f', '-'],
    JSON.stringify({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'lab-speaker', namespace: NS },
      rules: [
        {
          apiGroups: ['metallb.io'],
          resources: ['ipaddresspools', 'l2advertisements'],
          verbs: ['get', 'list', 'watch'],
        },
        {
          apiGroups: ['metallb.io'],
          // MetalLB writes ServiceL2Status through its status subresource.
          resources: ['servicel2statuses', 'servicel2statuses/status'],
          verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'],
        },
      ],
    }),
  );
  await k([
    'create',
    'rolebinding',
    '-n',
    NS,
    'lab-speaker',
    '--role=lab-speaker',
    `--serviceaccount=${NS}:speaker`,
  ]);
  if (opts.inject) await k(['label', 'namespace', NS, 'drainguard.io/inject=enabled']);
  const peers = c.nodes.map((n) => n.name).map((n) => ({ node: n, ip: c.bed.node(n).ipv4 }));
  const podLabels = { app: 'metallb', component: 'speaker' };
  await k(
    ['apply', '-f', '-'],
    JSON.stringify({
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'speaker', namespace: NS, labels: podLabels },
      spec: {
        selector: { matchLabels: podLabels },
        template: {
          metadata: { labels: podLabels },
          spec: {
            serviceAccountName: 'speaker',
            hostNetwork: true,
            terminationGracePeriodSeconds: 30,
            containers: [
              {
                name: 'speaker',
                image: 'drainguard-lab:dev',
                imagePullPolicy: 'Never',
                args: ['lab/sim/speaker/speaker.ts', JSON.stringify({ iface: 'eth0', namespace: NS, peers })],
                env: [{ name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } }],
                ports: [
                  { name: 'monitoring', containerPort: 7472 },
                  { name: 'memberlist-tcp', containerPort: 7946, protocol: 'TCP' },
                  { name: 'memberlist-udp', containerPort: 7946, protocol: 'UDP' },
                ],
                securityContext: { capabilities: { drop: ['ALL'], add: ['NET_RAW'] } },
                // A request, as a production install sets one: without it the speaker and its ARP
                // responder ran at the kernel's smallest CPU weight (cpu.shares 2) and, on the lab's
                // two loaded cores, answered a takeover hundreds of ms after the old owner withdrew.
                resources: { requests: { cpu: '100m', memory: '64Mi' } },
              },
            ],
          },
        },
      },
    }),
  );
  await k(['rollout', 'status', '-n', NS, 'daemonset/speaker', '--timeout=180s']);
}

/**
 * The LoadBalancer Service web/www with `vip` as its address (MetalLB's controller's part) and a
 * ready endpoint on every node: no selector, a hand-made EndpointSlice (MetalLB's speakers
 * announce only a service with a serving endpoint). `vip` must lie in the lab pool.
 */
export async function installLoadBalancer(c: Cluster, vip: string): Promise<void> {
  await c.k(['create', 'namespace', 'web']);
  const client = c.client();
  try {
    await putLoadBalancer(client, {
      name: 'www',
      namespace: 'web',
      vip,
      endpoints: c.nodes.map((n) => ({ node: n.name, ip: c.bed.node(n.name).ipv4 })),
    });
  } finally {
    client.close();
  }
}
