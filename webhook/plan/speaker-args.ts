// What the speaker container's command line says about the L2 handover. MetalLB's
// --ignore-exclude-lb (Helm `speaker.ignoreExcludeLB`, v0.14.4+) makes every speaker ignore the
// exclude label the handover relies on: the pod is admitted, the sidecar told to run no handover,
// and the pod's author warned.
import type { FeatureName, SidecarConfig } from '../../shared/contract.ts';
import { EXCLUDE_LABEL } from '../../shared/names.ts';
import type { ContainerLike } from './step.ts';

export const IGNORE_EXCLUDE_LB = 'ignore-exclude-lb';

const strings = (v: unknown): string[] =>
  Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];

/**
 * Whether the container's command and args set the flag the way Go's flag package reads it:
 * `-ignore-exclude-lb` or `--ignore-exclude-lb`, alone or `=value` (strconv.ParseBool), the last
 * one counting. Words inside an argument count too (`sh -c "/speaker --ignore-exclude-lb"`). A
 * value Go would refuse counts as set: that speaker would not start, and nothing is lost by not
 * handing it over.
 */
export function ignoresExcludeLb(container: ContainerLike | undefined): boolean {
  let on = false;
  const words = [...strings(container?.command), ...strings(container?.args)].flatMap((a) => a.split(/\s+/));
  for (const w of words) {
    const m = /^--?ignore-exclude-lb(?:=(.*))?$/.exec(w);
    if (!m) continue;
    const value = m[1];
    on = value === undefined || !['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(value);
  }
  return on;
}

/** The setting for the sidecar and the warning for the pod's author, when the speaker has the flag. */
export function readSpeakerArgs(
  features: ReadonlySet<FeatureName>,
  guarded: string | undefined,
  containers: ContainerLike[],
): { settings: Partial<SidecarConfig>; warnings: string[] } {
  const speaker = containers.find((c) => String(c.name) === guarded);
  if (!features.has('l2-handover') || !ignoresExcludeLb(speaker)) return { settings: {}, warnings: [] };
  return {
    settings: { speakerIgnoresExcludeLb: true },
    warnings: [
      `drainguard: container ${guarded} runs with --${IGNORE_EXCLUDE_LB}: MetalLB then ignores the ${EXCLUDE_LABEL} label, ` +
        'so the L2 handover is off for this pod (nothing is labelled or fenced at a drain; its VIPs move when the speaker stops); ' +
        'remove the flag (Helm speaker.ignoreExcludeLB=false) to turn it on',
    ],
  };
}
