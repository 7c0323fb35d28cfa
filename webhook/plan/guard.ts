// What the sidecar guards: the container whose stop it waits for, the Leases it hands over, the
// memberlist ports its fail-safe may cut.
import { type FeatureName, type Profile, specOf } from '../../shared/contract.ts';
import { ANNOTATIONS } from '../../shared/names.ts';
import { declaredPorts } from './port.ts';
import { PROFILE_SPECS } from './profiles.ts';
import { type ContainerLike, type Denial, denial, type Step, skip } from './step.ts';
import { checkLeases, checkMemberlistPorts } from './validate.ts';

export interface Guarded {
  /** The guarded container's name; none for a profile that guards nothing (netfilter cleanup). */
  guarded: string | undefined;
  warnings: string[];
}

/** The container the annotation names, the profile's, or the only one; a skupper pod without its own is skipped. */
export function findGuardedContainer(
  profile: Profile,
  features: ReadonlySet<FeatureName>,
  annotations: Record<string, string>,
  containers: ContainerLike[],
): Step<Guarded> {
  const names = containers.map((c) => String(c.name));
  const preferred = PROFILE_SPECS[profile].guardedContainer;
  const key = profile === 'metallb-speaker' ? ANNOTATIONS.guardedContainer : ANNOTATIONS.leaderContainer;
  const raw =
    annotations[key] ?? annotations[ANNOTATIONS.guardedContainer] ?? annotations[ANNOTATIONS.leaderContainer];
  if (raw !== undefined)
    return names.includes(raw)
      ? { guarded: raw, warnings: [] }
      : denial(`${key}=${JSON.stringify(raw)}: no such container; containers are ${names.join(', ')}`);
  if (preferred && names.includes(preferred)) return { guarded: preferred, warnings: [] };
  if (profile === 'skupper-router')
    return skip('no-profile', [
      `drainguard: not injected: skupper router pod has no container ${preferred}; set ${ANNOTATIONS.leaderContainer}`,
    ]);
  if (!features.has('lease-handover') && !features.has('l2-handover'))
    return { guarded: undefined, warnings: [] };
  if (names.length !== 1)
    return denial(`${key} is required: the pod has several containers (${names.join(', ')})`);
  const only = names[0] as string;
  const warnings =
    profile === 'metallb-speaker' ? [`drainguard: no container named speaker; guarding ${only}`] : [];
  return { guarded: only, warnings };
}

/** The Leases the annotation names, else the profile's own (if any). */
export function resolveLeases(
  profile: Profile,
  annotations: Record<string, string>,
): Step<string[] | undefined> {
  const raw = annotations[ANNOTATIONS.leases];
  if (raw === undefined) return PROFILE_SPECS[profile].leases;
  const checked = checkLeases(raw);
  return checked.leases ?? denial(`${ANNOTATIONS.leases}=${JSON.stringify(raw)}: ${checked.problem}`);
}

const ML_ANNOTATION = specOf('memberlistPorts').annotation as string;

/** The annotated memberlist ports must be ports the guarded container declares. */
export function checkMemberlistAnnotation(
  annotations: Record<string, string>,
  guarded: string | undefined,
  containers: ContainerLike[],
): Denial | undefined {
  const raw = annotations[ML_ANNOTATION];
  if (raw === undefined) return undefined;
  const c = guarded === undefined ? undefined : containers.find((x) => String(x.name) === guarded);
  const problem = checkMemberlistPorts(raw, guarded ?? '(none)', c ? [...declaredPorts([c]).keys()] : []);
  return problem === undefined ? undefined : denial(`${ML_ANNOTATION}=${JSON.stringify(raw)}: ${problem}`);
}

/** Lease handover needs at least one Lease to hand over. */
export function requireLeases(
  profile: Profile,
  features: ReadonlySet<FeatureName>,
  leases: readonly string[] | undefined,
): Denial | undefined {
  if (!features.has('lease-handover') || (leases ?? []).length > 0) return undefined;
  return denial(`${ANNOTATIONS.leases} is required for profile ${profile}: name the Lease(s) to hand over`);
}
