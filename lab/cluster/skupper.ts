// A skupper site as skupper lays it out, on the lab cluster: the `skupper-router` Deployment
// (2 replicas on different nodes, service account skupper-router) whose kube-adaptor container is
// the client-go candidate simulator from the lab image (skupper's Go binary cannot run here),
// electing through the Lease `skupper-site-leader`. With `inject`, the namespace is labelled and
// the README's bindings for drainguard's sidecar are created first.
import { join } from 'node:path';
import { waitFor } from '../../shared/clock.ts';
import type { Lease } from '../../shared/kube/types.ts';
import type { Cluster } from './cluster.ts';
import { followEvents } from './logs.ts';
import { deployment, IDLE_ARGS } from './manifests.ts';

const REPO = join(import.meta.dirname, '..', '..');

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
    // The README's per-site commands: drainguard's Lease role (writes to skupper's Lease only)
    // and its node reader.
    await k(['apply', '-n', ns, '-f', join(REPO, 'manifests', 'sidecar-rbac', 'skupper-site', 'role.yaml')]);
    await k([
      'create',
      'rolebinding',
      '-n',
      ns,
      'drainguard-sidecar-lease',
      '--role=drainguard-sidecar-skupper',
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

interface RouterPod {
  metadata: { name: string; deletionTimestamp?: string };
  spec: { nodeName: string };
}
interface CandidateEvent {
  ev: string;
  t: number;
}

/** The site's current leader: the Lease holder among its running router pods (waits for one). */
export async function siteLeader(c: Cluster, ns: string, timeoutMs = 180_000): Promise<RouterPod> {
  const client = c.client();
  try {
    return await waitFor(
      `a leader among the routers of ${ns}`,
      async () => {
        const lease = await client
          .get<Lease>(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${SKUPPER_LEASE}`)
          .catch(() => undefined);
        const pods = await client.get<{ items: RouterPod[] }>(`/api/v1/namespaces/${ns}/pods`, {
          query: { labelSelector: `lab.drainguard.io/site=${ns}` },
        });
        return pods.items.find(
          (p) => !p.metadata.deletionTimestamp && p.metadata.name === lease?.spec?.holderIdentity,
        );
      },
      { timeoutMs, intervalMs: 100 },
    );
  } finally {
    client.close();
  }
}

/**
 * Runs `act` (which stops the site's leader `leader`: a drain, a pod deletion) and measures the
 * leaderless window the simulators' own logs show: from the old leader's "stopped-leading" to the
 * next holder's first "leading", both on this machine's clock.
 */
export async function leaderChange(
  c: Cluster,
  ns: string,
  leader: string,
  act: () => Promise<void>,
  timeoutMs = 180_000,
): Promise<{ next: string; stoppedAt: number; leadingAt: number }> {
  const T = { timeoutMs, intervalMs: 100 };
  const client = c.client();
  const oldLog = followEvents<CandidateEvent>(c, ns, leader, 'kube-adaptor');
  const logs = [oldLog];
  try {
    await waitFor(`${leader}'s log open`, () => oldLog.lines.length > 0, T);
    const from = Date.now();
    await act();
    const stopped = await waitFor(
      'the old leader stopped',
      () => oldLog.events.find((e) => e.ev === 'stopped-leading' && e.t >= from),
      T,
    );
    // Whoever leads next: the other replica, or (Lease left to expire) the ReplicaSet's
    // replacement if it came up in time and asked first.
    const next = await waitFor(
      'a new holder',
      async () => {
        const h = (
          await client
            .get<Lease>(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${SKUPPER_LEASE}`)
            .catch(() => undefined)
        )?.spec?.holderIdentity;
        return h && h !== leader ? h : undefined;
      },
      T,
    );
    const newLog = followEvents<CandidateEvent>(c, ns, next, 'kube-adaptor');
    logs.push(newLog);
    const leading = await waitFor(
      'the new holder leads',
      () => newLog.events.find((e) => e.ev === 'leading' && e.t >= from),
      T,
    );
    return { next, stoppedAt: stopped.t, leadingAt: leading.t };
  } finally {
    for (const l of logs) l.proc.kill();
    client.close();
  }
}
