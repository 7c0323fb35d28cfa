// The sidecar's port and bind address, and how the kubelet reaches it there.
import type { Profile } from '../../shared/contract.ts';
import { ANNOTATIONS } from '../../shared/names.ts';
import { DEFAULT_PORTS } from './profiles.ts';
import { type ContainerLike, denial, isObj, type Step } from './step.ts';

export interface Endpoint {
  port: number;
  /** Set on the host network only. */
  host?: string;
}

/** Every port the pod declares (containerPort and hostPort), with the container that declares it. */
export function declaredPorts(containers: ContainerLike[]): Map<number, string> {
  const ports = new Map<number, string>();
  for (const c of containers) {
    if (!Array.isArray(c.ports)) continue;
    for (const p of c.ports) {
      if (!isObj(p)) continue;
      for (const k of ['containerPort', 'hostPort'] as const) {
        const n = p[k];
        if (typeof n === 'number' && !ports.has(n)) ports.set(n, String(c.name));
      }
    }
  }
  return ports;
}

/** The annotated port (checked against every declared one) or the first free from the profile's default. */
export function choosePort(
  profile: Profile,
  annotations: Record<string, string>,
  containers: ContainerLike[],
  hostNetwork: boolean,
): Step<Endpoint> {
  const port = freePort(profile, annotations[ANNOTATIONS.port], declaredPorts(containers));
  if (typeof port === 'string') return denial(port);
  // hostNetwork: /prestop withdraws the node's VIPs and must not be reachable from the network.
  return hostNetwork ? { port, host: '127.0.0.1' } : { port };
}

/** A free port, or why there is none. */
function freePort(
  profile: Profile,
  requested: string | undefined,
  used: Map<number, string>,
): number | string {
  if (requested !== undefined) {
    const n = /^\d+$/.test(requested) ? Number(requested) : Number.NaN;
    if (!Number.isInteger(n) || n < 1024 || n > 65535)
      return `${ANNOTATIONS.port}=${JSON.stringify(requested)}: accepted is a whole number from 1024 to 65535`;
    const owner = used.get(n);
    if (owner !== undefined)
      return `${ANNOTATIONS.port}=${n}: port ${n} is already used by container ${owner}; choose another port`;
    return n;
  }
  // Skip other profiles' defaults too: two injected DaemonSets on one node must not meet.
  const others = new Set(Object.entries(DEFAULT_PORTS).flatMap(([p, n]) => (p === profile ? [] : [n])));
  for (let n = DEFAULT_PORTS[profile]; n <= 65535; n++) if (!used.has(n) && !others.has(n)) return n;
  return 'no free port for the sidecar';
}

/** The httpGet of a probe or hook on the sidecar's endpoint. */
export const httpGet = (path: string, { port, host }: Endpoint) => ({
  path,
  port,
  ...(host ? { host } : {}),
  scheme: 'HTTP',
});
