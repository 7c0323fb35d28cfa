// The injection as a JSON Patch of the pod, from small builders: missing arrays and maps are created
// first, keys escaped (RFC 6901).
import { type FeatureName, PRESTOP_PROFILES, type Profile } from '../../shared/contract.ts';
import { ANNOTATIONS, SIDECAR_NAME } from '../../shared/names.ts';
import { type PatchOp, pointer } from './json-patch.ts';
import type { PodView } from './pod.ts';
import { type Endpoint, httpGet } from './port.ts';
import { PROFILE_SPECS } from './profiles.ts';
import type { Sidecar } from './sidecar.ts';
import { type ContainerLike, isObj, type Obj } from './step.ts';

const GRACE_MARGIN_SECONDS = 5;
/** terminationGracePeriodSeconds of a pod that sets none (Kubernetes' default, not the handover budget). */
const KUBERNETES_DEFAULT_GRACE_SECONDS = 30;

/** Some ops, and what to tell the pod's author about them. */
interface Part {
  ops: PatchOp[];
  warnings: string[];
}
const part = (ops: PatchOp[] = [], warnings: string[] = []): Part => ({ ops, warnings });

/** The sidecar (first init container when native, last container when classic) and its volume. */
export function sidecarOps(spec: Obj, sidecar: Sidecar, native: boolean): PatchOp[] {
  const { container, volume } = sidecar;
  const ops: PatchOp[] = [];
  if (!native) ops.push({ op: 'add', path: '/spec/containers/-', value: container });
  else if (Array.isArray(spec.initContainers))
    ops.push({ op: 'add', path: '/spec/initContainers/0', value: container });
  else ops.push({ op: 'add', path: '/spec/initContainers', value: [container] });
  if (Array.isArray(spec.volumes)) ops.push({ op: 'add', path: '/spec/volumes/-', value: volume });
  else ops.push({ op: 'add', path: '/spec/volumes', value: [volume] });
  return ops;
}

/** The guarded container's preStop waits for the handover; one it already has is kept. */
export function preStopOps(
  profile: Profile,
  containers: ContainerLike[],
  guarded: string | undefined,
  endpoint: Endpoint,
): Part {
  if (!PRESTOP_PROFILES.has(profile) || guarded === undefined) return part();
  const idx = containers.findIndex((c) => String(c.name) === guarded);
  const lifecycle = containers[idx]?.lifecycle;
  if (isObj(lifecycle) && lifecycle.preStop !== undefined)
    return part(
      [],
      [`drainguard: container ${guarded} already has a preStop hook; kept it, handover is not awaited`],
    );
  const preStop = { httpGet: httpGet('/prestop', endpoint) };
  const op: PatchOp = isObj(lifecycle)
    ? { op: 'add', path: pointer('spec', 'containers', idx, 'lifecycle', 'preStop'), value: preStop }
    : { op: 'add', path: pointer('spec', 'containers', idx, 'lifecycle'), value: { preStop } };
  return part([op]);
}

/** The Lease and L2 handovers share the pod's PID namespace unless the pod says otherwise. */
export function processNamespaceOps(spec: Obj, features: ReadonlySet<FeatureName>): Part {
  const lease = features.has('lease-handover');
  if (!lease && !features.has('l2-handover')) return part();
  // Lease: the sidecar must see the leader container stop before it names a successor. During
  // pod termination the kubelet publishes container statuses only once every container has
  // stopped (kubelet 1.20 on the lab cluster: the leader's exit never reached the API while the
  // sidecar ran), so the API cannot tell; with one PID namespace the sidecar sees the leader's
  // processes go. L2: a speaker killed while its pod stays is seen gone at once, not at the
  // kubelet's next status update (~1 s, or more just after a kubelet restart), and handed over.
  if (spec.shareProcessNamespace === undefined)
    return part([{ op: 'add', path: '/spec/shareProcessNamespace', value: true }]);
  if (spec.shareProcessNamespace !== true)
    return part(
      [],
      [
        lease
          ? 'drainguard: shareProcessNamespace is false: the sidecar cannot see the leader container stop, so the Lease is left to expire at a drain'
          : 'drainguard: shareProcessNamespace is false: a speaker that crashes is handed over only once the kubelet reports it stopped (~1 s later)',
      ],
    );
  return part();
}

/** terminationGracePeriodSeconds raised to cover the handover budget; the old value kept in an annotation. */
export function graceOps(
  profile: Profile,
  spec: Obj,
  budgetSeconds: number,
): Part & { annotations: Record<string, string> } {
  const none = { ops: [], warnings: [], annotations: {} };
  if (!PROFILE_SPECS[profile].coversHandover) return none;
  const current =
    typeof spec.terminationGracePeriodSeconds === 'number' ? spec.terminationGracePeriodSeconds : undefined;
  const needed = budgetSeconds + GRACE_MARGIN_SECONDS;
  if ((current ?? KUBERNETES_DEFAULT_GRACE_SECONDS) >= needed) return none;
  return {
    ops: [{ op: 'add', path: '/spec/terminationGracePeriodSeconds', value: needed }],
    warnings: [
      `drainguard: terminationGracePeriodSeconds raised from ${current ?? `default ${KUBERNETES_DEFAULT_GRACE_SECONDS}`} to ${needed} to cover the ${budgetSeconds} s handover budget`,
    ],
    annotations: { [ANNOTATIONS.originalGrace]: current === undefined ? 'unset' : String(current) },
  };
}

/** The annotations added: into the existing map, as a new map, or in new metadata. */
export function annotationOps(
  pod: Pick<PodView, 'hasMetadata' | 'hasAnnotations'>,
  added: Record<string, string>,
): PatchOp[] {
  if (pod.hasAnnotations)
    return Object.entries(added).map(([k, v]) => ({
      op: 'add',
      path: pointer('metadata', 'annotations', k),
      value: v,
    }));
  if (pod.hasMetadata) return [{ op: 'add', path: '/metadata/annotations', value: added }];
  return [{ op: 'add', path: '/metadata', value: { annotations: added } }];
}

export interface PatchInputs {
  pod: Pick<PodView, 'spec' | 'containers' | 'hasMetadata' | 'hasAnnotations'>;
  profile: Profile;
  features: ReadonlySet<FeatureName>;
  native: boolean;
  sidecar: Sidecar;
  guarded: string | undefined;
  endpoint: Endpoint;
  budgetSeconds: number;
  /** drainguard's version, for the status annotation. */
  version: string;
}

export interface PatchResult {
  patch: PatchOp[];
  warnings: string[];
  /** Annotations the patch adds: the original grace period (if raised) and the status. */
  annotations: Record<string, string>;
}

/** The whole patch: sidecar and volume, preStop, PID namespace, grace period, and the annotations. */
export function buildPatch(i: PatchInputs): PatchResult {
  const { pod, profile, features, endpoint } = i;
  const preStop = preStopOps(profile, pod.containers, i.guarded, endpoint);
  const pidNamespace = processNamespaceOps(pod.spec, features);
  const grace = graceOps(profile, pod.spec, i.budgetSeconds);
  const annotations: Record<string, string> = {
    ...grace.annotations,
    [ANNOTATIONS.injected]: JSON.stringify({
      version: i.version,
      profile,
      features: [...features],
      mode: i.native ? 'native' : 'classic',
      port: endpoint.port,
      ...(endpoint.metricsPort ? { metricsPort: endpoint.metricsPort } : {}),
      container: SIDECAR_NAME,
    }),
  };
  const ops = [
    ...sidecarOps(pod.spec, i.sidecar, i.native),
    ...preStop.ops,
    ...pidNamespace.ops,
    ...grace.ops,
  ];
  const metadata = annotationOps(pod, annotations);
  // New metadata goes first; annotations into existing metadata go last.
  return {
    patch: pod.hasMetadata ? [...ops, ...metadata] : [...metadata, ...ops],
    warnings: [...preStop.warnings, ...pidNamespace.warnings, ...grace.warnings],
    annotations,
  };
}
