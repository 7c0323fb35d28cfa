// A skupper site as skupper lays it out, on the lab cluster: the `skupper-router` Deployment
// (2 replicas on different nodes, service account skupper-router) whose kube-adaptor container is
// the client-go candidate simulator from the lab image (skupper's Go binary cannot run here),
// electing through the Lease `skupper-site-leader`. With `inject`, the namespace is labelled and
// the README's bindings for drainguard's sidecar are created first.
import type { Cluster } from './cluster.ts';
import { deployment, IDLE_ARGS } from './manifests.ts';

export const SKUPPER_LEASE = 'skupper-site-leader';
/** The router pods' labels (plus `lab.drainguard.io/site: <namespace>`, for `kubectl drain --pod-selector`). */
export const ROUTER_LABELS = { 'skupper.io/component': 'router', application: 'skupper-router' };

export async function installSkupperSite(c: Cluster, ns: string, opts: { inject: boolean }): Promise<void> {
  const k = (args: string[], input?: string) => c.k(args, input === undefined ? {} : { input });
  await k(['create', 'namespace', ns]);
  await k(['create', 'serviceaccount', '-n', ns, 'skupper-router']);
  // skupper's own grant for its leader election.
  await k([
    'create',
    'role',
    '-n',
    ns,
    'skupper-leases',
    '--verb=get,create,update',
    '--resource=leases.coordination.k8s.io',
  ]);
  await k([
    'create',
    'rolebinding',
    '-n',
    ns,
    'skupper-leases',
    '--role=skupper-leases',
    `--serviceaccount=${ns}:skupper-router`,
  ]);
  if (opts.inject) {
    // The README's per-site one-liners: drainguard's Lease role and its node reader.
    await k([
      'create',
      'rolebinding',
      '-n',
      ns,
      'drainguard-sidecar-lease',
      '--clusterrole=drainguard-sidecar-lease',
      `--serviceaccount=${ns}:skupper-router`,
    ]);
    await k([
      'create',
      'clusterrolebinding',
      `drainguard-sidecar-nodes-${ns}`,
      '--clusterrole=drainguard-sidecar-nodes',
      `--serviceaccount=${ns}:skupper-router`,
    ]);
    await k(['label', 'namespace', ns, 'drainguard.io/inject=enabled']);
  }
  const labels = { ...ROUTER_LABELS, 'lab.drainguard.io/site': ns };
  await k(
    ['apply', '-f', '-'],
    JSON.stringify(
      deployment('skupper-router', ns, labels, 2, {
        serviceAccountName: 'skupper-router',
        terminationGracePeriodSeconds: 30,
        affinity: {
          podAntiAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: [
              { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: labels } },
            ],
          },
        },
        containers: [
          { name: 'router', image: 'drainguard-lab:dev', imagePullPolicy: 'Never', args: IDLE_ARGS },
          {
            name: 'kube-adaptor',
            image: 'drainguard-lab:dev',
            imagePullPolicy: 'Never',
            args: ['lab/sim/lease-candidate-pod.ts', SKUPPER_LEASE],
            env: [{ name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } }],
          },
        ],
      }),
    ),
  );
  await k(['rollout', 'status', '-n', ns, 'deployment/skupper-router', '--timeout=180s']);
}
