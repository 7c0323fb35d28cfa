// The sidecar container and its /tmp volume.
import type { FeatureName } from '../../shared/contract.ts';
import type { EnvVar } from '../../shared/contract-env.ts';
import { SIDECAR_NAME } from '../../shared/names.ts';
import { type Endpoint, httpGet } from './port.ts';
import { NETFILTER_FEATURES } from './profiles.ts';
import { isObj, type Obj } from './step.ts';

/** The image keeps the bundle at /app/drainguard.mjs (Dockerfile). */
export const SIDECAR_COMMAND = [
  'node',
  '--max-semi-space-size=1',
  '--max-old-space-size=64',
  // No optimising compilers: the sidecar mostly waits, and their code and feedback cost ~4 MiB of
  // RSS on every node (make bench-sidecar).
  '--lite-mode',
  '/app/drainguard.mjs',
  'sidecar',
] as const;

/**
 * The name of the sidecar's scraped port: the one port of every endpoint off the host network, the
 * /metrics-only one on it (the chart's PodMonitor scrapes this name, whichever it is).
 */
export const SIDECAR_PORT_NAME = 'drainguard';

export interface SidecarInputs {
  image: string;
  env: EnvVar[];
  endpoint: Endpoint;
  hostNetwork: boolean;
  native: boolean;
  features: ReadonlySet<FeatureName>;
  /** The pod's spec.volumes, for a volume name of its own. */
  volumes: unknown;
}

export interface Sidecar {
  container: Obj;
  volume: Obj;
}

function uniqueName(base: string, taken: Set<string>): string {
  if (!taken.has(base)) return base;
  for (let i = 1; ; i++) if (!taken.has(`${base}-${i}`)) return `${base}-${i}`;
}

/** The container to inject: probes on its endpoint, root with NET_ADMIN only for netfilter features. */
export function buildSidecar(i: SidecarInputs): Sidecar {
  const { endpoint } = i;
  const needsNetAdmin = [...i.features].some((f) => NETFILTER_FEATURES.includes(f));
  const probe = (path: string, extra: Obj) => ({ httpGet: httpGet(path, endpoint), ...extra });
  const volumeNames = new Set(
    (Array.isArray(i.volumes) ? i.volumes : []).map((v) => (isObj(v) ? String(v.name) : '')),
  );
  const tmpVolume = uniqueName('drainguard-tmp', volumeNames);
  const container: Obj = {
    name: SIDECAR_NAME,
    image: i.image,
    imagePullPolicy: 'IfNotPresent',
    // The sidecar runs on every node: a small V8 heap keeps its footprint down (see docs/l2-handover.md).
    command: [...SIDECAR_COMMAND],
    env: i.env,
    // On the host network the main listener is on 127.0.0.1 (/prestop must not be reachable from
    // the network) and /metrics alone is also on the node's IP; a hostNetwork pod's hostPort is its
    // containerPort, and declaring it keeps the scheduler from placing two users of it on one node.
    ...(!i.hostNetwork
      ? { ports: [{ name: SIDECAR_PORT_NAME, containerPort: endpoint.port, protocol: 'TCP' }] }
      : endpoint.metricsPort
        ? {
            ports: [
              {
                name: SIDECAR_PORT_NAME,
                containerPort: endpoint.metricsPort,
                hostPort: endpoint.metricsPort,
                protocol: 'TCP',
              },
            ],
          }
        : {}),
    // Readiness is "configured and running", never API health: API trouble must not make the pod NotReady.
    // Every 2 s: a DaemonSet rollout waits for each new pod's readiness, and the kubelet probes at
    // the period's ticks (make bench-rollout; a 5 s period added ~2.5 s per node).
    readinessProbe: probe('/readyz', { periodSeconds: 2, timeoutSeconds: 2, failureThreshold: 3 }),
    livenessProbe: probe('/healthz', { periodSeconds: 10, timeoutSeconds: 2, failureThreshold: 6 }),
    // No CPU limit: the kernel's CFS quota throttles every process the container starts, and a
    // handover runs nft and ip several times on its way to the fence. Under the 200m limit it once
    // had, a 1.37 kubelet's quota made cordon → new owner 3.5–4 s instead of 1 s on the lab cluster
    // (the nft runs took 0.6–1 s each, throttled). The request is its weight when the node's CPU
    // is contended, as a drain makes it: at 10m (cpu.shares 10 beside a 100m speaker's 102) the
    // drained node's sidecars on the lab cluster saw the cordon and the leader's stop 3–6 s late
    // under `make test`'s load. Memory is capped.
    resources: {
      requests: { cpu: '50m', memory: '48Mi' },
      limits: { memory: '128Mi' },
    },
    securityContext: {
      seccompProfile: { type: 'RuntimeDefault' },
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      privileged: false,
      // Netfilter needs root with NET_ADMIN (no ambient capabilities for non-root in Kubernetes).
      ...(needsNetAdmin
        ? { runAsUser: 0, runAsNonRoot: false, capabilities: { drop: ['ALL'], add: ['NET_ADMIN'] } }
        : { runAsUser: 65532, runAsNonRoot: true, capabilities: { drop: ['ALL'] } }),
    },
    volumeMounts: [{ name: tmpVolume, mountPath: '/tmp' }],
    terminationMessagePolicy: 'FallbackToLogsOnError',
    ...(i.native ? { restartPolicy: 'Always' } : {}),
  };
  return { container, volume: { name: tmpVolume, emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } } };
}
