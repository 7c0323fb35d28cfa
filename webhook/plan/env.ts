// The sidecar's environment, rendered by the contract only and checked by the sidecar's own parser.
import type { FeatureName, Profile, SidecarConfig } from '../../shared/contract.ts';
import { ContractError, type EnvVar, parseSidecarEnv, renderSidecarEnv } from '../../shared/contract-env.ts';
import type { Endpoint } from './port.ts';
import { PROFILE_SPECS } from './profiles.ts';
import { type ContainerLike, denial, isObj, type Step } from './step.ts';

type EnvSettings = Parameters<typeof renderSidecarEnv>[0];
/** Stands in for a downward-API value (identity, the node's IP), which admission cannot know. */
const DOWNWARD_STAND_IN = 'from-the-downward-api';
// Pods of one DaemonSet/Deployment share their settings: render and validate each combination
// once (rendering clones the downward-API entries; validation walks the whole contract).
const envCache = new Map<string, EnvVar[] | string>();
const ENV_CACHE_MAX = 512;

/** The contract's env for these settings, or the sidecar's complaint about them. */
function renderEnvChecked(settings: EnvSettings): EnvVar[] | string {
  const key = JSON.stringify(settings);
  const hit = envCache.get(key);
  if (hit !== undefined) return hit;
  const env = renderSidecarEnv(settings);
  let result: EnvVar[] | string = env;
  try {
    parseSidecarEnv(envToRecord(env));
  } catch (e) {
    if (!(e instanceof ContractError)) throw e;
    result = e.problems.join('; ');
  }
  if (envCache.size >= ENV_CACHE_MAX) envCache.clear();
  envCache.set(key, result);
  return result;
}

function envToRecord(env: EnvVar[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of env) out[e.name] = e.value ?? DOWNWARD_STAND_IN;
  return out;
}

/** Container ports named memberlist*, sorted. */
function memberlistPorts(containers: ContainerLike[]): number[] {
  const out = new Set<number>();
  for (const c of containers)
    for (const p of Array.isArray(c.ports) ? c.ports : [])
      if (
        isObj(p) &&
        typeof p.name === 'string' &&
        p.name.startsWith('memberlist') &&
        typeof p.containerPort === 'number'
      )
        out.add(p.containerPort);
  return [...out].sort((a, b) => a - b);
}

export interface EnvInputs {
  profile: Profile;
  features: ReadonlySet<FeatureName>;
  /** From the annotations (readSettings). */
  settings: Partial<SidecarConfig>;
  endpoint: Endpoint;
  guarded: string | undefined;
  leases: string[] | undefined;
  namespace: string;
  containers: ContainerLike[];
}

/** The annotated settings plus what the webhook decided, as env; denied if the sidecar would reject it. */
export function buildEnv(i: EnvInputs): Step<EnvVar[]> {
  const { profile, endpoint, guarded, leases, namespace } = i;
  const settings = { ...i.settings };
  const pspec = PROFILE_SPECS[profile];
  if (profile === 'metallb-speaker' && settings.memberlistPorts === undefined) {
    // The fail-safe cuts memberlist: take its ports from the speaker's declared ports when named so.
    const ml = memberlistPorts(i.containers);
    if (ml.length > 0) settings.memberlistPorts = ml;
  }
  const rendered = renderEnvChecked({
    ...settings,
    profile,
    features: [...i.features],
    port: endpoint.port,
    ...(endpoint.host ? { bindAddress: endpoint.host } : {}),
    ...(endpoint.metricsPort ? { metricsPort: endpoint.metricsPort } : {}),
    ...(guarded ? { guardedContainer: guarded } : {}),
    ...(profile === 'metallb-speaker' && settings.metallbNamespace === undefined && namespace
      ? { metallbNamespace: namespace }
      : {}),
    ...(leases ? { leases } : {}),
    ...(pspec.successorSelector && settings.successorSelector === undefined
      ? { successorSelector: pspec.successorSelector }
      : {}),
  });
  if (typeof rendered === 'string') return denial(`the sidecar would reject its settings: ${rendered}`);
  return rendered;
}
