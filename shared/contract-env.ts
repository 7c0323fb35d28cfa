// The sidecar's environment, both ways: parsed by the sidecar (parseSidecarEnv, every bad variable
// at once) and rendered by the webhook for the injected container (renderSidecarEnv).
import { CONTRACT, FEATURES, type SidecarConfig, TAINT_EFFECTS } from './contract.ts';
import { parseVar } from './contract-values.ts';

export class ContractError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid sidecar environment:\n  ${problems.join('\n  ')}`);
    this.name = 'ContractError';
    this.problems = problems;
  }
}

/** Parses the sidecar's environment; throws ContractError naming every bad variable at once. */
export function parseSidecarEnv(env: Record<string, string | undefined>): SidecarConfig {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const spec of CONTRACT) {
    const given = env[spec.env];
    if (given === undefined || given === '') {
      if (spec.required) {
        problems.push(`${spec.env} is required: ${spec.description}`);
        continue;
      }
    }
    const parsed = parseVar(spec, given ?? '');
    if ('problem' in parsed)
      problems.push(`${spec.env}=${JSON.stringify(given || (spec.default ?? ''))}: ${parsed.problem}`);
    else out[spec.key] = parsed.value;
  }
  if (problems.length > 0) throw new ContractError(problems);
  const cfg = out as unknown as SidecarConfig;
  if (cfg.features.length === 0)
    problems.push('DRAINGUARD_FEATURES is empty: name at least one of ' + FEATURES.join(', '));
  for (const t of cfg.drainTaints) {
    const [key, effect, extra] = t.split(':');
    if (
      !key ||
      extra !== undefined ||
      (effect !== undefined && !(TAINT_EFFECTS as readonly string[]).includes(effect))
    )
      problems.push(
        `DRAINGUARD_DRAIN_TAINTS: ${JSON.stringify(t)} is not a taint; accepted are key or key:Effect with Effect one of ${TAINT_EFFECTS.join(', ')}`,
      );
  }
  if (cfg.metricsPort !== 0 && cfg.metricsAddress === '')
    problems.push(
      "DRAINGUARD_METRICS_ADDRESS is required when DRAINGUARD_METRICS_PORT is set: the node's IP (downward API status.hostIP)",
    );
  if (cfg.metricsPort !== 0 && cfg.metricsPort === cfg.port)
    problems.push(`DRAINGUARD_METRICS_PORT=${cfg.metricsPort} is DRAINGUARD_PORT's; choose another port`);
  if (cfg.features.includes('lease-handover') && cfg.leases.length === 0)
    problems.push('DRAINGUARD_LEASES is required when DRAINGUARD_FEATURES includes lease-handover');
  if (problems.length > 0) throw new ContractError(problems);
  return cfg;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef: { fieldPath: string } };
}

/** The downward-API part of the environment: identity the webhook cannot know at admission. */
export const DOWNWARD_ENV: readonly EnvVar[] = [
  { name: 'DRAINGUARD_POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
  { name: 'DRAINGUARD_POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
  { name: 'DRAINGUARD_POD_UID', valueFrom: { fieldRef: { fieldPath: 'metadata.uid' } } },
  { name: 'DRAINGUARD_NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
  { name: 'DRAINGUARD_POD_IPS', valueFrom: { fieldRef: { fieldPath: 'status.podIPs' } } },
];

/** The /metrics listener's address: the node's IP, which admission cannot know either. */
export const METRICS_ADDRESS_ENV: EnvVar = {
  name: 'DRAINGUARD_METRICS_ADDRESS',
  valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } },
};

const DOWNWARD_KEYS = new Set<keyof SidecarConfig>([
  'podName',
  'podNamespace',
  'podUid',
  'nodeName',
  'podIPs',
  'metricsAddress',
]);

function renderValue(value: unknown): string {
  if (Array.isArray(value)) return value.join(',');
  return String(value);
}

/**
 * Renders the environment for the injected container: downward-API identity plus every
 * setting that differs from its default (defaults stay implicit so the pod spec stays short),
 * and with a /metrics port the node's IP to bind it to.
 */
export function renderSidecarEnv(
  settings: Partial<
    Omit<SidecarConfig, 'podName' | 'podNamespace' | 'podUid' | 'nodeName' | 'podIPs' | 'metricsAddress'>
  >,
): EnvVar[] {
  const env: EnvVar[] = [];
  for (const spec of CONTRACT) {
    if (DOWNWARD_KEYS.has(spec.key)) continue;
    const value = settings[spec.key as keyof typeof settings];
    if (value === undefined) continue;
    const rendered = renderValue(value);
    if (!spec.required && rendered === (spec.default ?? '')) continue;
    env.push({ name: spec.env, value: rendered });
  }
  const metrics = settings.metricsPort ? [structuredClone(METRICS_ADDRESS_ENV)] : [];
  return [...env, ...metrics, ...DOWNWARD_ENV.map((e) => structuredClone(e))];
}
