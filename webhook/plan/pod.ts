// The first steps: the pod in the request, the pods never injected, the profile, the token.
import { PROFILES, type Profile } from '../../shared/contract.ts';
import { ANNOTATIONS, INJECT_LABEL, SIDECAR_NAME } from '../../shared/names.ts';
import { detectProfile } from './profiles.ts';
import {
  type AdmissionRequestLike,
  type ContainerLike,
  type Denial,
  denial,
  isObj,
  type Obj,
  type PlannerOptions,
  type Skip,
  type Step,
  skip,
  strMap,
} from './step.ts';

/** What the later steps read of the pod. */
export interface PodView {
  spec: Obj;
  containers: ContainerLike[];
  inits: ContainerLike[];
  namespace: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** Whether metadata and metadata.annotations exist: the patch creates what is missing. */
  hasMetadata: boolean;
  hasAnnotations: boolean;
  hostNetwork: boolean;
}

/** The pod of a Pod CREATE; every other request is skipped, a malformed pod denied. */
export function readPod(req: AdmissionRequestLike): Step<PodView> {
  const kind = req.kind?.kind;
  const group = req.kind?.group ?? '';
  if (kind !== 'Pod' || group !== '' || (req.subResource ?? '') !== '') return skip('not-a-pod');
  if (req.operation === 'UPDATE') return skip('update');
  if (req.operation !== 'CREATE') return skip('other-operation');

  const pod = req.object;
  if (!isObj(pod)) return denial('request.object must be a Pod object');
  const meta = isObj(pod.metadata) ? pod.metadata : {};
  const spec = pod.spec;
  if (!isObj(spec)) return denial('request.object.spec must be an object (the pod spec)');
  if (!Array.isArray(spec.containers) || spec.containers.length === 0 || !spec.containers.every(isObj))
    return denial('request.object.spec.containers must be a non-empty list of containers');
  const inits = Array.isArray(spec.initContainers) ? (spec.initContainers as unknown[]) : [];
  if (!inits.every(isObj)) return denial('request.object.spec.initContainers must be a list of containers');
  return {
    spec,
    containers: spec.containers as ContainerLike[],
    inits: inits as ContainerLike[],
    // The object's namespace is often empty at CREATE (generateName, namespaced POST): the request's counts.
    namespace: req.namespace || (typeof meta.namespace === 'string' ? meta.namespace : ''),
    labels: strMap(meta.labels),
    annotations: strMap(meta.annotations),
    hasMetadata: isObj(pod.metadata),
    hasAnnotations: isObj(meta.annotations),
    hostNetwork: spec.hostNetwork === true,
  };
}

/** Pods never injected, whatever their profile: excluded namespaces, opted out, the webhook's own, done. */
export function findExclusion(
  pod: Pick<PodView, 'namespace' | 'labels' | 'annotations' | 'containers' | 'inits'>,
  opts: Pick<PlannerOptions, 'excludedNamespaces' | 'ownNamespace' | 'selfLabels'>,
): Skip | undefined {
  const { namespace, labels } = pod;
  if (
    (opts.excludedNamespaces ?? ['kube-system']).includes(namespace) ||
    (opts.ownNamespace !== undefined && namespace === opts.ownNamespace)
  )
    return skip('excluded-namespace');
  // Honoured here as well as in the objectSelector: a hand-edited configuration must not inject opted-out pods.
  if (labels[INJECT_LABEL] === 'disabled') return skip('opted-out');
  const self = opts.selfLabels;
  if (self && Object.keys(self).length > 0 && Object.entries(self).every(([k, v]) => labels[k] === v))
    return skip('self');
  const names = new Set([...pod.containers, ...pod.inits].map((c) => String(c.name)));
  if (pod.annotations[ANNOTATIONS.injected] !== undefined || names.has(SIDECAR_NAME))
    return skip('already-injected');
  return undefined;
}

/** The profile the annotation names or the labels imply; a pod with none is skipped with a warning. */
export function chooseProfile(
  labels: Record<string, string>,
  annotations: Record<string, string>,
): Step<Profile> {
  const explicit = annotations[ANNOTATIONS.profile];
  if (explicit !== undefined && !(PROFILES as readonly string[]).includes(explicit))
    return denial(
      `${ANNOTATIONS.profile}=${JSON.stringify(explicit)}: accepted values are ${PROFILES.join(', ')}`,
    );
  const detection = detectProfile(labels, annotations);
  if (!detection.profile) return skip('no-profile', [`drainguard: not injected: ${detection.reason}`]);
  return detection.profile;
}

/** The sidecar talks to the API with the pod's token: without it, it crash-loops and the preStop fails. */
export function requireServiceAccountToken(spec: Obj): Denial | undefined {
  if (spec.automountServiceAccountToken !== false) return undefined;
  return denial(
    `spec.automountServiceAccountToken: false: the drainguard sidecar needs the service-account token; ` +
      `set it to true (or remove it), or opt the pod out with the label ${INJECT_LABEL}=disabled`,
  );
}
