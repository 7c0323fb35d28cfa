// The injection planner: a pure function from (admission request, pod, options) to a JSON
// Patch plus warnings, or a denial. No I/O: the server feeds it node versions it cached.
import {
  ContractError,
  type EnvVar,
  type Feature,
  PRESTOP_PROFILES,
  PROFILES,
  type Profile,
  parseSidecarEnv,
  renderSidecarEnv,
  type SidecarConfig,
} from '../shared/contract.ts';
import { type PatchOp, pointer } from './patch.ts';
import {
  A,
  DEFAULT_PORTS,
  detectProfile,
  INJECT_LABEL,
  NETFILTER_FEATURES,
  PROFILE_SPECS,
  SIDECAR_NAME,
} from './profiles.ts';
import { checkInterfaces, checkLeases, checkMemberlistPorts, checkNamespace } from './validate.ts';

export const SIDECAR_MODES = ['auto', 'native', 'classic'] as const;
export type SidecarMode = (typeof SIDECAR_MODES)[number];

export interface PlannerOptions {
  image: string;
  mode: SidecarMode;
  /** drainguard version, recorded in the status annotation. */
  version: string;
  /** kubeletVersion by node name; undefined = no cluster access (auto then picks classic). */
  kubeletVersions?: ReadonlyMap<string, string>;
  /** The API server's gitVersion: one older than 1.29 rejects probes on init containers. */
  apiServerVersion?: string;
  /** Namespaces never injected. */
  excludedNamespaces?: readonly string[];
  /** The webhook's own namespace: never injected, whatever excludedNamespaces says. */
  ownNamespace?: string;
  /** Labels of the webhook's own pods: never injected (a Fail webhook must not block itself). */
  selfLabels?: Record<string, string>;
}

export interface AdmissionRequestLike {
  operation?: string;
  kind?: { group?: string; version?: string; kind?: string };
  resource?: { group?: string; version?: string; resource?: string };
  subResource?: string;
  namespace?: string;
  name?: string;
  dryRun?: boolean;
  object?: unknown;
}

export type Plan =
  | {
      allowed: true;
      patch: PatchOp[];
      warnings: string[];
      /** Annotations the patch adds (also in the patch), for logs and tests. */
      annotations: Record<string, string>;
      /** Profile label for metrics: a profile, or why nothing was done. */
      outcome: string;
      profile?: Profile;
    }
  | { allowed: false; code: number; message: string; outcome: 'denied'; profile?: Profile };

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const strMap = (v: unknown): Record<string, string> => {
  if (!isObj(v)) return {};
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) if (typeof x === 'string') out[k] = x;
  return out;
};

const NATIVE_MIN_MINOR = 29;
/** The image keeps the bundle at /app/drainguard.mjs (Dockerfile). */
export const SIDECAR_COMMAND = [
  'node',
  '--max-semi-space-size=1',
  '--max-old-space-size=64',
  '/app/drainguard.mjs',
  'sidecar',
] as const;
const GRACE_MARGIN_SECONDS = 5;

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

const ML_ANNOTATION = 'drainguard.io/memberlist-ports';
/** Checks stricter than the contract's parser, run before it (memberlist ports need the pod: see plan()). */
const EARLY_CHECKS: Record<string, (raw: string) => string | undefined> = {
  'drainguard.io/l2-interfaces': checkInterfaces,
  'drainguard.io/metallb-namespace': checkNamespace,
};

const IDENTITY_ENV: Record<string, string> = {
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

type EnvSettings = Parameters<typeof renderSidecarEnv>[0];
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
  const out: Record<string, string> = { ...IDENTITY_ENV };
  for (const e of env) if (e.value !== undefined) out[e.name] = e.value;
  return out;
}

/** "v1.29.3-eks-1" → 29 when the major is 1; anything unparseable counts as old. */
function kubeletSupportsNative(version: string | undefined): boolean {
  const m = /^v?(\d+)\.(\d+)/.exec(version ?? '');
  if (!m) return false;
  const major = Number(m[1]);
  return major > 1 || (major === 1 && Number(m[2]) >= NATIVE_MIN_MINOR);
}

/** The node a pod will run on: spec.nodeName, or the DaemonSet controller's matchFields pin. */
export function targetNode(spec: Obj): string | undefined {
  if (typeof spec.nodeName === 'string' && spec.nodeName !== '') return spec.nodeName;
  const terms = (
    spec.affinity as { nodeAffinity?: { requiredDuringSchedulingIgnoredDuringExecution?: unknown } }
  )?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution as
    | { nodeSelectorTerms?: unknown }
    | undefined;
  const list = terms?.nodeSelectorTerms;
  if (!Array.isArray(list)) return undefined;
  const names = new Set<string>();
  for (const term of list) {
    const fields = isObj(term) && Array.isArray(term.matchFields) ? term.matchFields : [];
    for (const f of fields) {
      if (isObj(f) && f.key === 'metadata.name' && f.operator === 'In' && Array.isArray(f.values))
        for (const v of f.values) if (typeof v === 'string') names.add(v);
    }
  }
  return names.size === 1 ? [...names][0] : undefined;
}

function chooseMode(
  requested: SidecarMode,
  spec: Obj,
  versions: ReadonlyMap<string, string> | undefined,
  apiServer: string | undefined,
): { native: boolean; why: string } {
  if (requested === 'native') return { native: true, why: 'native sidecar requested' };
  if (requested === 'classic') return { native: false, why: 'classic sidecar requested' };
  if (!versions) return { native: false, why: 'node versions unknown (no cluster access): classic sidecar' };
  if (apiServer !== undefined && !kubeletSupportsNative(apiServer))
    return {
      native: false,
      why: `API server ${apiServer} is older than 1.${NATIVE_MIN_MINOR}: classic sidecar`,
    };
  const node = targetNode(spec);
  if (node !== undefined && versions.has(node)) {
    const v = versions.get(node);
    return kubeletSupportsNative(v)
      ? { native: true, why: `node ${node} kubelet ${v} supports native sidecars` }
      : {
          native: false,
          why: `node ${node} kubelet ${v} is older than 1.${NATIVE_MIN_MINOR}: classic sidecar`,
        };
  }
  const old = [...versions].filter(([, v]) => !kubeletSupportsNative(v)).map(([n]) => n);
  if (versions.size > 0 && old.length === 0)
    return { native: true, why: 'every kubelet supports native sidecars' };
  return {
    native: false,
    why:
      versions.size === 0
        ? 'no nodes known: classic sidecar'
        : `kubelets older than 1.${NATIVE_MIN_MINOR} on ${old.slice(0, 3).join(', ')}${old.length > 3 ? ', …' : ''}: classic sidecar`,
  };
}

interface ContainerLike extends Obj {
  name?: unknown;
  ports?: unknown;
  lifecycle?: unknown;
}

/** Every port the pod declares (containerPort and hostPort), with the container that declares it. */
function declaredPorts(containers: ContainerLike[]): Map<number, string> {
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

function choosePort(
  profile: Profile,
  requested: string | undefined,
  used: Map<number, string>,
): { port?: number; problem?: string } {
  if (requested !== undefined) {
    const n = /^\d+$/.test(requested) ? Number(requested) : Number.NaN;
    if (!Number.isInteger(n) || n < 1024 || n > 65535)
      return {
        problem: `${A.port}=${JSON.stringify(requested)}: accepted is a whole number from 1024 to 65535`,
      };
    const owner = used.get(n);
    if (owner !== undefined)
      return {
        problem: `${A.port}=${n}: port ${n} is already used by container ${owner}; choose another port`,
      };
    return { port: n };
  }
  // Skip other profiles' defaults too: two injected DaemonSets on one node must not meet.
  const others = new Set(Object.entries(DEFAULT_PORTS).flatMap(([p, n]) => (p === profile ? [] : [n])));
  for (let n = DEFAULT_PORTS[profile]; n <= 65535; n++)
    if (!used.has(n) && !others.has(n)) return { port: n };
  return { problem: 'no free port for the sidecar' };
}

function uniqueName(base: string, taken: Set<string>): string {
  if (!taken.has(base)) return base;
  for (let i = 1; ; i++) if (!taken.has(`${base}-${i}`)) return `${base}-${i}`;
}

/** Plans the mutation of one AdmissionRequest. Never throws on input it did not expect. */
export function plan(req: AdmissionRequestLike, opts: PlannerOptions): Plan {
  const kind = req.kind?.kind;
  const group = req.kind?.group ?? '';
  if (kind !== 'Pod' || group !== '' || (req.subResource ?? '') !== '') return allow('not-a-pod');
  if (req.operation === 'UPDATE') return allow('update');
  if (req.operation !== 'CREATE') return allow('other-operation');

  const pod = req.object;
  if (!isObj(pod)) return deny('request.object must be a Pod object');
  const meta = isObj(pod.metadata) ? pod.metadata : {};
  const spec = pod.spec;
  if (!isObj(spec)) return deny('request.object.spec must be an object (the pod spec)');
  if (!Array.isArray(spec.containers) || spec.containers.length === 0 || !spec.containers.every(isObj))
    return deny('request.object.spec.containers must be a non-empty list of containers');
  const containers = spec.containers as ContainerLike[];
  const initContainers = Array.isArray(spec.initContainers) ? (spec.initContainers as unknown[]) : [];
  if (!initContainers.every(isObj))
    return deny('request.object.spec.initContainers must be a list of containers');
  const inits = initContainers as ContainerLike[];

  // The object's namespace is often empty at CREATE (generateName, namespaced POST): the request's counts.
  const namespace = req.namespace || (typeof meta.namespace === 'string' ? meta.namespace : '');
  const labels = strMap(meta.labels);
  const annotations = strMap(meta.annotations);
  const hadAnnotations = isObj(meta.annotations);

  if (
    (opts.excludedNamespaces ?? ['kube-system']).includes(namespace) ||
    (opts.ownNamespace !== undefined && namespace === opts.ownNamespace)
  )
    return allow('excluded-namespace');
  // Honoured here as well as in the objectSelector: a hand-edited configuration must not inject opted-out pods.
  if (labels[INJECT_LABEL] === 'disabled') return allow('opted-out');
  const self = opts.selfLabels;
  if (self && Object.keys(self).length > 0 && Object.entries(self).every(([k, v]) => labels[k] === v))
    return allow('self');
  const allNames = new Set([...containers, ...inits].map((c) => String(c.name)));
  if (annotations[A.status] !== undefined || allNames.has(SIDECAR_NAME)) return allow('already-injected');

  const explicitProfile = annotations[A.profile];
  if (explicitProfile !== undefined && !(PROFILES as readonly string[]).includes(explicitProfile))
    return deny(
      `${A.profile}=${JSON.stringify(explicitProfile)}: accepted values are ${PROFILES.join(', ')}`,
    );
  const detection = detectProfile(labels, annotations);
  const profile = detection.profile;
  if (!profile) return allow('no-profile', [`drainguard: not injected: ${detection.reason}`]);
  const pspec = PROFILE_SPECS[profile];
  const warnings: string[] = [];
  const hostNetwork = spec.hostNetwork === true;

  // The sidecar talks to the API with the pod's token: without it, it crash-loops and the preStop fails.
  if (spec.automountServiceAccountToken === false)
    return deny(
      `spec.automountServiceAccountToken: false: the drainguard sidecar needs the service-account token; ` +
        `set it to true (or remove it), or opt the pod out with the label ${INJECT_LABEL}=disabled`,
      profile,
    );

  // --- settings from annotations, each validated by the contract's parser
  const settings: Partial<SidecarConfig> = {};
  for (const s of SETTING_ANNOTATIONS) {
    const raw = annotations[s.annotation];
    if (raw === undefined) continue;
    const early = EARLY_CHECKS[s.annotation]?.(raw);
    if (early !== undefined) return deny(`${s.annotation}=${JSON.stringify(raw)}: ${early}`, profile);
    const { value, problem } = parseSetting(s.env, s.key, raw);
    if (problem !== undefined)
      return deny(
        `${s.annotation}=${JSON.stringify(raw)}: ${problem.replace(/^[A-Z_]+=("[^"]*"|\S+): /, '')}`,
        profile,
      );
    (settings as Record<string, unknown>)[s.key] = value;
  }

  const nfRaw = annotations[A.netfilterCleanup];
  if (nfRaw !== undefined && nfRaw !== 'true' && nfRaw !== 'false')
    return deny(`${A.netfilterCleanup}=${JSON.stringify(nfRaw)}: accepted values are true, false`, profile);
  const features = new Set<Feature>(pspec.features);
  if (nfRaw === 'true') features.add('netfilter-cleanup');
  // The fence and ARP/NDP handover act on the node's interfaces: off the host network they would only
  // hand a pod author a root NET_ADMIN container in its own namespace.
  if (features.has('l2-handover') && !hostNetwork)
    return deny(
      `profile ${profile} (L2 handover) works in the node network namespace only: the pod needs spec.hostNetwork: true`,
      profile,
    );
  if (features.has('netfilter-cleanup') && !hostNetwork)
    return deny(
      `netfilter cleanup (${profile === 'netfilter-cleanup' ? `profile ${profile}` : `${A.netfilterCleanup}=true`}) ` +
        'works in the node network namespace only: the pod needs spec.hostNetwork: true',
      profile,
    );

  // --- mode
  const modeRaw = annotations[A.sidecarMode];
  if (modeRaw !== undefined && !(SIDECAR_MODES as readonly string[]).includes(modeRaw))
    return deny(
      `${A.sidecarMode}=${JSON.stringify(modeRaw)}: accepted values are ${SIDECAR_MODES.join(', ')}`,
      profile,
    );
  const mode = chooseMode(
    (modeRaw as SidecarMode | undefined) ?? opts.mode,
    spec,
    opts.kubeletVersions,
    opts.apiServerVersion,
  );

  // --- guarded container
  const names = containers.map((c) => String(c.name));
  let guarded: string | undefined;
  const guardKey = profile === 'metallb-speaker' ? A.guardedContainer : A.leaderContainer;
  const guardRaw = annotations[guardKey] ?? annotations[A.guardedContainer] ?? annotations[A.leaderContainer];
  if (guardRaw !== undefined) {
    if (!names.includes(guardRaw))
      return deny(
        `${guardKey}=${JSON.stringify(guardRaw)}: no such container; containers are ${names.join(', ')}`,
        profile,
      );
    guarded = guardRaw;
  } else if (pspec.guardedContainer && names.includes(pspec.guardedContainer))
    guarded = pspec.guardedContainer;
  else if (profile === 'skupper-router')
    return allow('no-profile', [
      `drainguard: not injected: skupper router pod has no container ${pspec.guardedContainer}; set ${A.leaderContainer}`,
    ]);
  else if (features.has('lease-handover') || features.has('l2-handover')) {
    if (names.length !== 1)
      return deny(`${guardKey} is required: the pod has several containers (${names.join(', ')})`, profile);
    guarded = names[0];
    if (profile === 'metallb-speaker')
      warnings.push(`drainguard: no container named speaker; guarding ${guarded}`);
  }

  // --- leases
  let leases = pspec.leases;
  const leasesRaw = annotations[A.leases];
  if (leasesRaw !== undefined) {
    const checked = checkLeases(leasesRaw);
    if (checked.leases === undefined)
      return deny(`${A.leases}=${JSON.stringify(leasesRaw)}: ${checked.problem}`, profile);
    leases = checked.leases;
  }

  const mlRaw = annotations[ML_ANNOTATION];
  if (mlRaw !== undefined) {
    const c = guarded === undefined ? undefined : containers[names.indexOf(guarded)];
    const problem = checkMemberlistPorts(mlRaw, guarded ?? '(none)', c ? [...declaredPorts([c]).keys()] : []);
    if (problem !== undefined) return deny(`${ML_ANNOTATION}=${JSON.stringify(mlRaw)}: ${problem}`, profile);
  }
  if (features.has('lease-handover') && (leases ?? []).length === 0)
    return deny(`${A.leases} is required for profile ${profile}: name the Lease(s) to hand over`, profile);

  // --- port and bind address
  const used = declaredPorts([...containers, ...inits]);
  const portChoice = choosePort(profile, annotations[A.port], used);
  if (portChoice.port === undefined) return deny(portChoice.problem ?? 'no port', profile);
  const port = portChoice.port;
  // hostNetwork: /prestop withdraws the node's VIPs and must not be reachable from the network.
  const host = hostNetwork ? '127.0.0.1' : undefined;

  // --- env via the contract only
  const budget = settings.handoverBudgetSeconds ?? 30;
  if (profile === 'metallb-speaker' && settings.memberlistPorts === undefined) {
    // The fail-safe cuts memberlist: take its ports from the speaker's declared ports when named so.
    const ml = memberlistPorts(containers);
    if (ml.length > 0) settings.memberlistPorts = ml;
  }
  const rendered = renderEnvChecked({
    ...settings,
    profile,
    features: [...features],
    port,
    ...(host ? { bindAddress: host } : {}),
    ...(guarded ? { guardedContainer: guarded } : {}),
    ...(profile === 'metallb-speaker' && settings.metallbNamespace === undefined && namespace
      ? { metallbNamespace: namespace }
      : {}),
    ...(leases ? { leases } : {}),
    ...(pspec.successorSelector && settings.successorSelector === undefined
      ? { successorSelector: pspec.successorSelector }
      : {}),
  });
  if (typeof rendered === 'string')
    return deny(`the sidecar would reject its settings: ${rendered}`, profile);
  const env = rendered;

  // --- the sidecar container
  const needsNetAdmin = [...features].some((f) => NETFILTER_FEATURES.includes(f));
  const probe = (path: string, extra: Obj) => ({
    httpGet: { path, port, ...(host ? { host } : {}), scheme: 'HTTP' },
    ...extra,
  });
  const volumeNames = new Set(
    (Array.isArray(spec.volumes) ? spec.volumes : []).map((v) => (isObj(v) ? String(v.name) : '')),
  );
  const tmpVolume = uniqueName('drainguard-tmp', volumeNames);
  const sidecar: Obj = {
    name: SIDECAR_NAME,
    image: opts.image,
    imagePullPolicy: 'IfNotPresent',
    // The sidecar runs on every node: a small V8 heap keeps its footprint down (see docs/l2-handover.md).
    command: [...SIDECAR_COMMAND],
    env,
    ports: hostNetwork ? [] : [{ name: 'drainguard', containerPort: port, protocol: 'TCP' }],
    // Readiness is "configured and running", never API health: API trouble must not make the pod NotReady.
    readinessProbe: probe('/readyz', { periodSeconds: 5, timeoutSeconds: 2, failureThreshold: 3 }),
    livenessProbe: probe('/healthz', { periodSeconds: 10, timeoutSeconds: 2, failureThreshold: 6 }),
    resources: {
      requests: { cpu: '10m', memory: '48Mi' },
      limits: { cpu: '200m', memory: '128Mi' },
    },
    securityContext: {
      seccompProfile: { type: 'RuntimeDefault' },
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      privileged: false,
      // Netfilter needs root with NET_ADMIN (no ambient capabilities for non-root in Kubernetes).
      ...(needsNetAdmin
        ? { runAsUser: 0, runAsNonRoot: false, capabilities: { drop: ['ALL'], add: ['NET_ADMIN'] } }
        : { runAsUser: 65532, runAsNonRoot: true, capabilities: { drop: ['ALL'] } }),
    },
    volumeMounts: [{ name: tmpVolume, mountPath: '/tmp' }],
    terminationMessagePolicy: 'FallbackToLogsOnError',
    ...(mode.native ? { restartPolicy: 'Always' } : {}),
  };
  if ((sidecar.ports as unknown[]).length === 0) delete sidecar.ports;

  // --- patch: missing arrays and maps are created first, keys escaped (RFC 6901)
  const patch: PatchOp[] = [];
  if (mode.native) {
    if (Array.isArray(spec.initContainers))
      patch.push({ op: 'add', path: '/spec/initContainers/0', value: sidecar });
    else patch.push({ op: 'add', path: '/spec/initContainers', value: [sidecar] });
  } else patch.push({ op: 'add', path: '/spec/containers/-', value: sidecar });
  const volume = { name: tmpVolume, emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } };
  if (Array.isArray(spec.volumes)) patch.push({ op: 'add', path: '/spec/volumes/-', value: volume });
  else patch.push({ op: 'add', path: '/spec/volumes', value: [volume] });

  if (PRESTOP_PROFILES.has(profile) && guarded !== undefined) {
    const idx = names.indexOf(guarded);
    const c = containers[idx] as ContainerLike;
    const lifecycle = isObj(c.lifecycle) ? c.lifecycle : undefined;
    const preStop = { httpGet: { path: '/prestop', port, ...(host ? { host } : {}), scheme: 'HTTP' } };
    if (lifecycle?.preStop !== undefined)
      warnings.push(
        `drainguard: container ${guarded} already has a preStop hook; kept it, handover is not awaited`,
      );
    else if (lifecycle)
      patch.push({
        op: 'add',
        path: pointer('spec', 'containers', idx, 'lifecycle', 'preStop'),
        value: preStop,
      });
    else patch.push({ op: 'add', path: pointer('spec', 'containers', idx, 'lifecycle'), value: { preStop } });
  }

  if (features.has('lease-handover')) {
    // The sidecar must see the leader container stop before it names a successor. During pod
    // termination the kubelet publishes container statuses only once every container has stopped
    // (kubelet 1.20 on the lab cluster: the leader's exit never reached the API while the sidecar
    // ran), so the API cannot tell; with one PID namespace the sidecar sees the leader's processes go.
    if (spec.shareProcessNamespace === undefined)
      patch.push({ op: 'add', path: '/spec/shareProcessNamespace', value: true });
    else if (spec.shareProcessNamespace !== true)
      warnings.push(
        'drainguard: shareProcessNamespace is false: the sidecar cannot see the leader container stop, so the Lease is left to expire at a drain',
      );
  }
  const added: Record<string, string> = {};
  if (pspec.coversHandover) {
    const current =
      typeof spec.terminationGracePeriodSeconds === 'number' ? spec.terminationGracePeriodSeconds : undefined;
    const needed = budget + GRACE_MARGIN_SECONDS;
    if ((current ?? 30) < needed) {
      patch.push({ op: 'add', path: '/spec/terminationGracePeriodSeconds', value: needed });
      added[A.originalGrace] = current === undefined ? 'unset' : String(current);
      warnings.push(
        `drainguard: terminationGracePeriodSeconds raised from ${current ?? 'default 30'} to ${needed} to cover the ${budget} s handover budget`,
      );
    }
  }
  added[A.status] = JSON.stringify({
    version: opts.version,
    profile,
    features: [...features],
    mode: mode.native ? 'native' : 'classic',
    port,
    container: SIDECAR_NAME,
  });
  if (hadAnnotations)
    for (const [k, v] of Object.entries(added))
      patch.push({ op: 'add', path: pointer('metadata', 'annotations', k), value: v });
  else if (isObj(pod.metadata)) patch.push({ op: 'add', path: '/metadata/annotations', value: added });
  else patch.unshift({ op: 'add', path: '/metadata', value: { annotations: added } });

  if (opts.mode === 'auto' && modeRaw === undefined && !mode.native && !opts.kubeletVersions)
    warnings.push(`drainguard: ${mode.why}`);
  return { allowed: true, patch, warnings, annotations: added, outcome: profile, profile };
}
