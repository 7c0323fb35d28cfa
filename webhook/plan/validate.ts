// Annotation values checked at admission, so that a pod author gets a denial naming the annotation
// instead of a sidecar that refuses (or misuses) the value later. Pure: value in, complaint or nothing out.
import { INTERFACE_NAME_RULE, isInterfaceName } from '../../shared/net/interface-name.ts';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export const isDns1123Label = (s: string): boolean => s.length <= 63 && DNS1123_LABEL.test(s);
export const isDns1123Subdomain = (s: string): boolean => s.length <= 253 && DNS1123_SUBDOMAIN.test(s);

/** Comma-separated list where every item is non-empty (no trimming: the sidecar does not trim either). */
const items = (raw: string): string[] | undefined => {
  const list = raw.split(',');
  return list.every((x) => x !== '') ? list : undefined;
};

/** The names the L2 fence accepts (shared with it): narrower than Linux's, which allows `x"y`. */
export function checkInterfaces(raw: string): string | undefined {
  const list = items(raw);
  if (list?.every(isInterfaceName)) return undefined;
  return `accepted is a comma-separated list of interface names (${INTERFACE_NAME_RULE})`;
}

export function checkNamespace(raw: string): string | undefined {
  return isDns1123Label(raw)
    ? undefined
    : 'accepted is a namespace name: a DNS-1123 label (lowercase letters, digits and -, at most 63 characters, starting and ending alphanumeric)';
}

/** Memberlist ports the fail-safe may cut: only ports the guarded container declares, never e.g. 6443 or 10250. */
export function checkMemberlistPorts(
  raw: string,
  container: string,
  declared: readonly number[],
): string | undefined {
  const list = items(raw);
  const ok = list?.every((p) => /^\d+$/.test(p) && declared.includes(Number(p)));
  if (ok) return undefined;
  return `accepted are ports declared by container ${container}: ${declared.length > 0 ? declared.join(', ') : '(none declared)'}`;
}

/** "name" or "namespace/name": name a DNS-1123 subdomain (≤ 253), namespace a DNS-1123 label (≤ 63). */
export function checkLeases(raw: string): { leases?: string[]; problem?: string } {
  const list = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const valid = (l: string) => {
    const parts = l.split('/');
    if (parts.length === 1) return isDns1123Subdomain(l);
    return parts.length === 2 && isDns1123Label(parts[0] as string) && isDns1123Subdomain(parts[1] as string);
  };
  if (list.length > 0 && list.every(valid)) return { leases: list };
  return {
    problem:
      'accepted is a comma-separated list of Lease names (DNS-1123 subdomain, at most 253 characters) or namespace/name (namespace a DNS-1123 label, at most 63 characters)',
  };
}
