// The injection planner: a pure function from (admission request, pod, options) to a JSON
// Patch plus warnings, or a denial. No I/O: the server feeds it node versions it cached.
// plan() composes the steps of this directory: each takes plain data and returns its result, or a
// Stop (a denial, or an allow that leaves the pod unchanged). A new check belongs in one of them.
import type { Profile } from '../../shared/contract.ts';
import { defaultOf } from '../../shared/contract-values.ts';
import { buildEnv } from './env.ts';
import { checkMemberlistAnnotation, findGuardedContainer, requireLeases, resolveLeases } from './guard.ts';
import { buildPatch } from './injection-patch.ts';
import { chooseMode } from './mode.ts';
import { chooseProfile, findExclusion, readPod, requireServiceAccountToken } from './pod.ts';
import { choosePort, metricsPortWarnings } from './port.ts';
import { readSettings, resolveFeatures } from './settings.ts';
import { buildSidecar } from './sidecar.ts';
import { readSpeakerArgs } from './speaker-args.ts';
import { type AdmissionRequestLike, isStop, type Plan, type PlannerOptions, type Stop } from './step.ts';

const allow = (outcome: string, warnings: string[] = []): Plan => ({
  allowed: true,
  patch: [],
  warnings,
  annotations: {},
  outcome,
});
const deny = (message: string, profile?: Profile, code = 400): Plan => ({
  allowed: false,
  code,
  message,
  outcome: 'denied',
  ...(profile ? { profile } : {}),
});
/** Where a step stopped, as the answer: a denial carries the profile once it is known. */
const answer = (stop: Stop, profile?: Profile): Plan =>
  'denied' in stop ? deny(stop.denied, profile) : allow(stop.skip, stop.warnings);

/** Plans the mutation of one AdmissionRequest. Never throws on input it did not expect. */
export function plan(req: AdmissionRequestLike, opts: PlannerOptions): Plan {
  const pod = readPod(req);
  if (isStop(pod)) return answer(pod);
  const excluded = findExclusion(pod, opts);
  if (excluded) return answer(excluded);
  const profile = chooseProfile(pod.labels, pod.annotations);
  if (isStop(profile)) return answer(profile);

  const { spec, containers, annotations, hostNetwork } = pod;
  const noToken = requireServiceAccountToken(spec);
  if (noToken) return answer(noToken, profile);
  const settings = readSettings(annotations);
  if (isStop(settings)) return answer(settings, profile);
  const features = resolveFeatures(profile, annotations, hostNetwork);
  if (isStop(features)) return answer(features, profile);
  const mode = chooseMode(annotations, spec, opts);
  if (isStop(mode)) return answer(mode, profile);
  const guard = findGuardedContainer(profile, features, annotations, containers);
  if (isStop(guard)) return answer(guard, profile);
  const { guarded } = guard;
  const leases = resolveLeases(profile, annotations);
  if (isStop(leases)) return answer(leases, profile);
  const badMemberlist = checkMemberlistAnnotation(annotations, guarded, containers);
  if (badMemberlist) return answer(badMemberlist, profile);
  const noLeases = requireLeases(profile, features, leases);
  if (noLeases) return answer(noLeases, profile);
  const endpoint = choosePort(profile, annotations, [...containers, ...pod.inits], hostNetwork);
  if (isStop(endpoint)) return answer(endpoint, profile);
  const speakerArgs = readSpeakerArgs(features, guarded, containers);
  const env = buildEnv({
    profile,
    features,
    settings: { ...settings, ...speakerArgs.settings },
    endpoint,
    guarded,
    leases,
    namespace: pod.namespace,
    containers,
  });
  if (isStop(env)) return answer(env, profile);

  const native = mode.native;
  const sidecar = buildSidecar({
    image: opts.image,
    env,
    endpoint,
    hostNetwork,
    native,
    features,
    volumes: spec.volumes,
  });
  const patch = buildPatch({
    pod,
    profile,
    features,
    native,
    sidecar,
    guarded,
    endpoint,
    budgetSeconds: settings.handoverBudgetSeconds ?? defaultOf('handoverBudgetSeconds'),
    version: opts.version,
  });
  const warnings = [
    ...guard.warnings,
    ...speakerArgs.warnings,
    ...patch.warnings,
    ...metricsPortWarnings(annotations, endpoint),
    ...(mode.warning ? [mode.warning] : []),
  ];
  return {
    allowed: true,
    patch: patch.patch,
    warnings,
    annotations: patch.annotations,
    outcome: profile,
    profile,
  };
}
