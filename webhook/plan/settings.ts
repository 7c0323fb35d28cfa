// Settings and features from annotations. Which annotation sets which variable, its parser and its
// default are the contract's (shared/contract.ts); the webhook adds only stricter checks.
import {
  CONTRACT,
  type FeatureName,
  type Profile,
  type SidecarConfig,
  type VarSpec,
} from '../../shared/contract.ts';
import { parseVar } from '../../shared/contract-values.ts';
import { ANNOTATIONS } from '../../shared/names.ts';
import { PROFILE_SPECS } from './profiles.ts';
import { denial, type Step } from './step.ts';
import { checkInterfaces, checkNamespace } from './validate.ts';

/** The contract's variables a pod annotation sets, in contract order. */
const ANNOTATED = CONTRACT.filter((v): v is VarSpec & { annotation: string } => v.annotation !== undefined);

/** Checks stricter than the contract's parser, run before it (memberlist ports need the pod: see checkMemberlistAnnotation). */
const EARLY_CHECKS: Partial<Record<keyof SidecarConfig, (raw: string) => string | undefined>> = {
  l2Interfaces: checkInterfaces,
  metallbNamespace: checkNamespace,
};

/** The settings the annotations give, typed; the first bad value is denied, named by its annotation. */
export function readSettings(annotations: Record<string, string>): Step<Partial<SidecarConfig>> {
  const settings: Record<string, unknown> = {};
  for (const v of ANNOTATED) {
    const raw = annotations[v.annotation];
    if (raw === undefined) continue;
    const early = EARLY_CHECKS[v.key]?.(raw);
    const parsed = early === undefined ? parseVar(v, raw) : { problem: early };
    if ('problem' in parsed) return denial(`${v.annotation}=${JSON.stringify(raw)}: ${parsed.problem}`);
    settings[v.key] = parsed.value;
  }
  return settings as Partial<SidecarConfig>;
}

/** The profile's features, plus netfilter cleanup when annotated; node-level features need the host network. */
export function resolveFeatures(
  profile: Profile,
  annotations: Record<string, string>,
  hostNetwork: boolean,
): Step<Set<FeatureName>> {
  const nfRaw = annotations[ANNOTATIONS.netfilterCleanup];
  if (nfRaw !== undefined && nfRaw !== 'true' && nfRaw !== 'false')
    return denial(
      `${ANNOTATIONS.netfilterCleanup}=${JSON.stringify(nfRaw)}: accepted values are true, false`,
    );
  const features = new Set<FeatureName>(PROFILE_SPECS[profile].features);
  if (nfRaw === 'true') features.add('netfilter-cleanup');
  // The fence and ARP/NDP handover act on the node's interfaces: off the host network they would only
  // hand a pod author a root NET_ADMIN container in its own namespace.
  if (features.has('l2-handover') && !hostNetwork)
    return denial(
      `profile ${profile} (L2 handover) works in the node network namespace only: the pod needs spec.hostNetwork: true`,
    );
  if (features.has('netfilter-cleanup') && !hostNetwork)
    return denial(
      `netfilter cleanup (${profile === 'netfilter-cleanup' ? `profile ${profile}` : `${ANNOTATIONS.netfilterCleanup}=true`}) ` +
        'works in the node network namespace only: the pod needs spec.hostNetwork: true',
    );
  return features;
}
