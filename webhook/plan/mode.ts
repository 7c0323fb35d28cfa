// Native sidecar (an init container with restartPolicy: Always, Kubernetes >= 1.29) or classic.

import { ANNOTATIONS } from '../../shared/names.ts';
import {
  denial,
  isObj,
  type Obj,
  type PlannerOptions,
  SIDECAR_MODES,
  type SidecarMode,
  type Step,
} from './step.ts';

const NATIVE_MIN_MINOR = 29;

/** "v1.29.3-eks-1" → 29 when the major is 1; anything unparseable counts as old. */
function kubeletSupportsNative(version: string | undefined): boolean {
  const m = /^v?(\d+)\.(\d+)/.exec(version ?? '');
  if (!m) return false;
  const major = Number(m[1]);
  return major > 1 || (major === 1 && Number(m[2]) >= NATIVE_MIN_MINOR);
}

/** The node a pod will run on: spec.nodeName, or the DaemonSet controller's matchFields pin. */
export function targetNode(spec: Obj): string | undefined {
  if (typeof spec.nodeName === 'string' && spec.nodeName !== '') return spec.nodeName;
  const terms = (
    spec.affinity as { nodeAffinity?: { requiredDuringSchedulingIgnoredDuringExecution?: unknown } }
  )?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution as
    | { nodeSelectorTerms?: unknown }
    | undefined;
  const list = terms?.nodeSelectorTerms;
  if (!Array.isArray(list)) return undefined;
  const names = new Set<string>();
  for (const term of list) {
    const fields = isObj(term) && Array.isArray(term.matchFields) ? term.matchFields : [];
    for (const f of fields) {
      if (isObj(f) && f.key === 'metadata.name' && f.operator === 'In' && Array.isArray(f.values))
        for (const v of f.values) if (typeof v === 'string') names.add(v);
    }
  }
  return names.size === 1 ? [...names][0] : undefined;
}

export interface ModeChoice {
  native: boolean;
  /** Why, in words. */
  why: string;
  /** Set when auto chose classic without node versions (no cluster access). */
  warning?: string;
}

function decideMode(
  requested: SidecarMode,
  spec: Obj,
  versions: ReadonlyMap<string, string> | undefined,
  apiServer: string | undefined,
): ModeChoice {
  if (requested === 'native') return { native: true, why: 'native sidecar requested' };
  if (requested === 'classic') return { native: false, why: 'classic sidecar requested' };
  if (!versions) return { native: false, why: 'node versions unknown (no cluster access): classic sidecar' };
  if (apiServer !== undefined && !kubeletSupportsNative(apiServer))
    return {
      native: false,
      why: `API server ${apiServer} is older than 1.${NATIVE_MIN_MINOR}: classic sidecar`,
    };
  const node = targetNode(spec);
  if (node !== undefined && versions.has(node)) {
    const v = versions.get(node);
    return kubeletSupportsNative(v)
      ? { native: true, why: `node ${node} kubelet ${v} supports native sidecars` }
      : {
          native: false,
          why: `node ${node} kubelet ${v} is older than 1.${NATIVE_MIN_MINOR}: classic sidecar`,
        };
  }
  const old = [...versions].filter(([, v]) => !kubeletSupportsNative(v)).map(([n]) => n);
  if (versions.size > 0 && old.length === 0)
    return { native: true, why: 'every kubelet supports native sidecars' };
  return {
    native: false,
    why:
      versions.size === 0
        ? 'no nodes known: classic sidecar'
        : `kubelets older than 1.${NATIVE_MIN_MINOR} on ${old.slice(0, 3).join(', ')}${old.length > 3 ? ', …' : ''}: classic sidecar`,
  };
}

/** The mode the annotation or the webhook asks for; auto decides by the API server's and kubelets' versions. */
export function chooseMode(
  annotations: Record<string, string>,
  spec: Obj,
  opts: Pick<PlannerOptions, 'mode' | 'kubeletVersions' | 'apiServerVersion'>,
): Step<ModeChoice> {
  const raw = annotations[ANNOTATIONS.sidecarMode];
  if (raw !== undefined && !(SIDECAR_MODES as readonly string[]).includes(raw))
    return denial(
      `${ANNOTATIONS.sidecarMode}=${JSON.stringify(raw)}: accepted values are ${SIDECAR_MODES.join(', ')}`,
    );
  const mode = decideMode(
    (raw as SidecarMode | undefined) ?? opts.mode,
    spec,
    opts.kubeletVersions,
    opts.apiServerVersion,
  );
  if (opts.mode === 'auto' && raw === undefined && !mode.native && !opts.kubeletVersions)
    return { ...mode, warning: `drainguard: ${mode.why}` };
  return mode;
}
