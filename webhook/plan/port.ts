// The sidecar's ports and bind address, and how the kubelet reaches it there.
import type { Profile } from '../../shared/contract.ts';
import { ANNOTATIONS } from '../../shared/names.ts';
import { DEFAULT_METRICS_PORTS, DEFAULT_PORTS } from './profiles.ts';
import { type ContainerLike, denial, isObj, type Step } from './step.ts';

export interface Endpoint {
  port: number;
  /** Set on the host network only. */
  host?: string;
  /** On the host network only: the /metrics-only listener's port on the node's IP. */
  metricsPort?: number;
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

/** Every profile's default ports but this profile's own `mine`: skipped, so two injected DaemonSets on one node never meet. */
const othersDefaults = (profile: Profile, mine: Record<Profile, number>): Set<number> =>
  new Set(
    [DEFAULT_PORTS, DEFAULT_METRICS_PORTS].flatMap((table) =>
      Object.entries(table).flatMap(([p, n]) => (p === profile && table === mine ? [] : [n])),
    ),
  );

/**
 * The annotated ports (checked against every declared one) or the first free from the profile's
 * defaults. On the host network the sidecar listens on 127.0.0.1, and /metrics alone also on the
 * node's IP, on a port of its own.
 */
export function choosePort(
  profile: Profile,
  annotations: Record<string, string>,
  containers: ContainerLike[],
  hostNetwork: boolean,
): Step<Endpoint> {
  const used = declaredPorts(containers);
  const port = freePort(ANNOTATIONS.port, annotations[ANNOTATIONS.port], used, {
    from: DEFAULT_PORTS[profile],
    skip: othersDefaults(profile, DEFAULT_PORTS),
    none: 'no free port for the sidecar',
  });
  if (typeof port === 'string') return denial(port);
  if (!hostNetwork) return { port };
  // hostNetwork: /prestop withdraws the node's VIPs and must not be reachable from the network.
  const own = new Map([[port, `the sidecar's own port (${ANNOTATIONS.port})`]]);
  // "0" turns it off: on the host network a declared port is a hostPort, and a DaemonSet rolling
  // out with maxSurge cannot place its new pod beside an old one that holds it.
  const requested = annotations[ANNOTATIONS.metricsPort];
  if (requested === '0') return { port, host: '127.0.0.1' };
  const metricsPort = freePort(ANNOTATIONS.metricsPort, requested, used, {
    from: DEFAULT_METRICS_PORTS[profile],
    skip: othersDefaults(profile, DEFAULT_METRICS_PORTS),
    own,
    none: "no free port for the sidecar's /metrics listener",
    accepted: '0 (no /metrics listener on the node) or a whole number from 1024 to 65535',
  });
  if (typeof metricsPort === 'string') return denial(metricsPort);
  return { port, host: '127.0.0.1', metricsPort };
}

/** What the pod's author is told about a metrics port annotation the planner did not use. */
export function metricsPortWarnings(annotations: Record<string, string>, endpoint: Endpoint): string[] {
  const requested = annotations[ANNOTATIONS.metricsPort];
  // On the host network it was used, or "0" turned the listener off.
  if (requested === undefined || endpoint.host !== undefined) return [];
  return [
    `drainguard: ${ANNOTATIONS.metricsPort} is used on hostNetwork pods only and was ignored: this pod serves /metrics with the rest on its drainguard port ${endpoint.port}`,
  ];
}

/** A free port, or why there is none. */
function freePort(
  annotation: string,
  requested: string | undefined,
  used: Map<number, string>,
  defaults: { from: number; skip: Set<number>; own?: Map<number, string>; none: string; accepted?: string },
): number | string {
  const own = defaults.own ?? new Map<number, string>();
  if (requested !== undefined) {
    const n = /^\d+$/.test(requested) ? Number(requested) : Number.NaN;
    if (!Number.isInteger(n) || n < 1024 || n > 65535)
      return `${annotation}=${JSON.stringify(requested)}: accepted is ${defaults.accepted ?? 'a whole number from 1024 to 65535'}`;
    const owner = used.get(n);
    if (owner !== undefined)
      return `${annotation}=${n}: port ${n} is already used by container ${owner}; choose another port`;
    const ours = own.get(n);
    if (ours !== undefined) return `${annotation}=${n}: port ${n} is ${ours}; choose another port`;
    return n;
  }
  for (let n = defaults.from; n <= 65535; n++)
    if (!used.has(n) && !defaults.skip.has(n) && !own.has(n)) return n;
  return defaults.none;
}

/** The httpGet of a probe or hook on the sidecar's endpoint. */
export const httpGet = (path: string, { port, host }: Endpoint) => ({
  path,
  port,
  ...(host ? { host } : {}),
  scheme: 'HTTP',
});
