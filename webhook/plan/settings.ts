// Settings and features from annotations, each value validated by the contract's own parser.
import {
  ContractError,
  type Feature,
  type Profile,
  parseSidecarEnv,
  type SidecarConfig,
} from '../../shared/contract.ts';
import { ANNOTATIONS } from '../../shared/names.ts';
import { PROFILE_SPECS } from './profiles.ts';
import { denial, type Step } from './step.ts';
import { checkInterfaces, checkNamespace } from './validate.ts';

/** Annotations that set one contract value each; validated with the contract's own parser. */
const SETTING_ANNOTATIONS: readonly { annotation: string; key: keyof SidecarConfig; env: string }[] = [
  {
    annotation: 'drainguard.io/handover-budget-seconds',
    key: 'handoverBudgetSeconds',
    env: 'DRAINGUARD_HANDOVER_BUDGET_SECONDS',
  },
  { annotation: 'drainguard.io/observe-only', key: 'observeOnly', env: 'DRAINGUARD_OBSERVE_ONLY' },
  { annotation: 'drainguard.io/drain-signal', key: 'drainSignal', env: 'DRAINGUARD_DRAIN_SIGNAL' },
  { annotation: 'drainguard.io/log-level', key: 'logLevel', env: 'DRAINGUARD_LOG_LEVEL' },
  { annotation: 'drainguard.io/identity-scheme', key: 'identityScheme', env: 'DRAINGUARD_IDENTITY_SCHEME' },
  {
    annotation: 'drainguard.io/successor-selector',
    key: 'successorSelector',
    env: 'DRAINGUARD_SUCCESSOR_SELECTOR',
  },
  { annotation: 'drainguard.io/l2-interfaces', key: 'l2Interfaces', env: 'DRAINGUARD_L2_INTERFACES' },
  {
    annotation: 'drainguard.io/memberlist-ports',
    key: 'memberlistPorts',
    env: 'DRAINGUARD_MEMBERLIST_PORTS',
  },
  {
    annotation: 'drainguard.io/metallb-namespace',
    key: 'metallbNamespace',
    env: 'DRAINGUARD_METALLB_NAMESPACE',
  },
  { annotation: 'drainguard.io/cleanup-dry-run', key: 'cleanupDryRun', env: 'DRAINGUARD_CLEANUP_DRY_RUN' },
];

/** Checks stricter than the contract's parser, run before it (memberlist ports need the pod: see checkMemberlistAnnotation). */
const EARLY_CHECKS: Record<string, (raw: string) => string | undefined> = {
  'drainguard.io/l2-interfaces': checkInterfaces,
  'drainguard.io/metallb-namespace': checkNamespace,
};

/** Stand-ins for the downward-API identity, which the contract requires but admission cannot know. */
export const IDENTITY_ENV: Record<string, string> = {
  DRAINGUARD_POD_NAME: 'p',
  DRAINGUARD_POD_NAMESPACE: 'n',
  DRAINGUARD_NODE_NAME: 'node',
};

/** Parses one annotation value through the contract; returns the typed value or the contract's complaint. */
function parseSetting(
  env: string,
  key: keyof SidecarConfig,
  raw: string,
): { value?: unknown; problem?: string } {
  try {
    const cfg = parseSidecarEnv({
      ...IDENTITY_ENV,
      DRAINGUARD_PROFILE: 'netfilter-cleanup',
      DRAINGUARD_FEATURES: 'netfilter-cleanup',
      [env]: raw,
    });
    return { value: cfg[key] };
  } catch (e) {
    if (e instanceof ContractError) return { problem: e.problems.join('; ') };
    throw e;
  }
}

/** The settings the annotations give, typed; the first bad value is denied, named by its annotation. */
export function readSettings(annotations: Record<string, string>): Step<Partial<SidecarConfig>> {
  const settings: Partial<SidecarConfig> = {};
  for (const s of SETTING_ANNOTATIONS) {
    const raw = annotations[s.annotation];
    if (raw === undefined) continue;
    const early = EARLY_CHECKS[s.annotation]?.(raw);
    if (early !== undefined) return denial(`${s.annotation}=${JSON.stringify(raw)}: ${early}`);
    const { value, problem } = parseSetting(s.env, s.key, raw);
    if (problem !== undefined)
      return denial(
        `${s.annotation}=${JSON.stringify(raw)}: ${problem.replace(/^[A-Z_]+=("[^"]*"|\S+): /, '')}`,
      );
    (settings as Record<string, unknown>)[s.key] = value;
  }
  return settings;
}

/** The profile's features, plus netfilter cleanup when annotated; node-level features need the host network. */
export function resolveFeatures(
  profile: Profile,
  annotations: Record<string, string>,
  hostNetwork: boolean,
): Step<Set<Feature>> {
  const nfRaw = annotations[ANNOTATIONS.netfilterCleanup];
  if (nfRaw !== undefined && nfRaw !== 'true' && nfRaw !== 'false')
    return denial(
      `${ANNOTATIONS.netfilterCleanup}=${JSON.stringify(nfRaw)}: accepted values are true, false`,
    );
  const features = new Set<Feature>(PROFILE_SPECS[profile].features);
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
