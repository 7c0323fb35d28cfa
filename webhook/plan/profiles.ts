// Profiles: which workload a pod is, and what the sidecar does for it. Detection is by
// well-known labels (pure data in, decision out); `drainguard.io/profile` overrides it.
import { type FeatureName, PROFILES, type Profile } from '../../shared/contract.ts';
import { ANNOTATIONS } from '../../shared/names.ts';

/** Default sidecar port per profile: different, so two injected hostNetwork pods on one node do not meet. */
export const DEFAULT_PORTS: Record<Profile, number> = {
  'metallb-speaker': 7480,
  'skupper-router': 7481,
  lease: 7482,
  'netfilter-cleanup': 7483,
};

/**
 * Default port of the /metrics-only listener that hostNetwork pods get on the node's IP, per
 * profile (two injected DaemonSets on one node must not meet). Clear of MetalLB's speaker
 * (metrics 7472, FRR metrics 7473, memberlist 7946), the kubelet (10248, 10250, 10255), kube-proxy
 * (10249, 10256), node-exporter (9100) and the sidecar's own loopback ports above.
 */
export const DEFAULT_METRICS_PORTS: Record<Profile, number> = {
  'metallb-speaker': 7490,
  'skupper-router': 7491,
  lease: 7492,
  'netfilter-cleanup': 7493,
};

/** Features that change netfilter and so need NET_ADMIN (and root); everything else drops all capabilities. */
export const NETFILTER_FEATURES: readonly FeatureName[] = ['l2-handover', 'netfilter-cleanup'];

export const isProfile = (s: string): s is Profile => (PROFILES as readonly string[]).includes(s);

export interface Detection {
  profile?: Profile;
  /** How it was decided, for warnings and the status annotation. */
  source: 'annotation' | 'labels' | 'none';
  reason: string;
}

/**
 * Detects the profile from labels and annotations (annotation values are validated by the planner).
 * netfilter-cleanup is never inferred from hostNetwork alone: it needs the opt-in annotation.
 */
export function detectProfile(
  labels: Record<string, string>,
  annotations: Record<string, string>,
): Detection {
  const explicit = annotations[ANNOTATIONS.profile];
  if (explicit !== undefined && isProfile(explicit))
    return { profile: explicit, source: 'annotation', reason: `${ANNOTATIONS.profile}=${explicit}` };
  const l = (k: string) => labels[k];
  if (
    (l('app.kubernetes.io/name') === 'metallb' && l('app.kubernetes.io/component') === 'speaker') ||
    (l('app') === 'metallb' && l('component') === 'speaker')
  )
    return { profile: 'metallb-speaker', source: 'labels', reason: 'MetalLB speaker labels' };
  if (l('skupper.io/component') === 'router' || l('application') === 'skupper-router')
    return { profile: 'skupper-router', source: 'labels', reason: 'skupper router labels' };
  if (annotations[ANNOTATIONS.leases] !== undefined)
    return { profile: 'lease', source: 'annotation', reason: `${ANNOTATIONS.leases} is set` };
  if (annotations[ANNOTATIONS.netfilterCleanup] === 'true')
    return {
      profile: 'netfilter-cleanup',
      source: 'annotation',
      reason: `${ANNOTATIONS.netfilterCleanup}=true`,
    };
  return {
    source: 'none',
    reason:
      'no drainguard profile: not a MetalLB speaker or skupper router, and no drainguard.io/profile, ' +
      'drainguard.io/leases or drainguard.io/netfilter-cleanup annotation',
  };
}

export interface ProfileSpec {
  features: FeatureName[];
  /** Preferred guarded container name (the speaker, the leader container). */
  guardedContainer?: string;
  leases?: string[];
  successorSelector?: string;
  /** Raise terminationGracePeriodSeconds to cover the handover budget. */
  coversHandover: boolean;
  requiresHostNetwork: boolean;
}

export const PROFILE_SPECS: Record<Profile, ProfileSpec> = {
  'metallb-speaker': {
    features: ['l2-handover'],
    guardedContainer: 'speaker',
    coversHandover: true,
    requiresHostNetwork: false,
  },
  'skupper-router': {
    features: ['lease-handover'],
    guardedContainer: 'kube-adaptor',
    leases: ['skupper-site-leader'],
    successorSelector: 'skupper.io/component=router',
    coversHandover: true,
    requiresHostNetwork: false,
  },
  lease: {
    features: ['lease-handover'],
    coversHandover: true,
    requiresHostNetwork: false,
  },
  'netfilter-cleanup': {
    features: ['netfilter-cleanup'],
    coversHandover: false,
    requiresHostNetwork: true,
  },
};
