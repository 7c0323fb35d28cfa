// The contract between webhook and sidecar: the injected container's environment.
// The webhook renders it (renderSidecarEnv), the sidecar parses it (parseSidecarEnv), both in
// contract-env.ts; neither reads anything else from the other. Every variable is declared once,
// here, with its default, what it accepts, and the pod annotation that sets it (if any).

export const PROFILES = ['metallb-speaker', 'skupper-router', 'lease', 'netfilter-cleanup'] as const;
export type Profile = (typeof PROFILES)[number];
/**
 * Profiles whose guarded container gets a preStop httpGet to the sidecar's /prestop (only the L2
 * one holds its speaker until the VIP has moved; lease handover happens after the leader stops).
 * The webhook injects the hook for these and the sidecar serves /prestop for these only.
 */
export const PRESTOP_PROFILES: ReadonlySet<Profile> = new Set<Profile>(['metallb-speaker']);

export const FEATURES = ['l2-handover', 'lease-handover', 'netfilter-cleanup'] as const;
export type FeatureName = (typeof FEATURES)[number];

export const IDENTITY_SCHEMES = ['pod-name', 'pod-name-prefix', 'node-name'] as const;
export type IdentityScheme = (typeof IDENTITY_SCHEMES)[number];

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * Taints that mean "this node is being drained or removed" unless configured otherwise, as
 * `key:Effect`: the cordon taint, cluster-autoscaler's scale-down, Karpenter v1 and v0.32–0.37
 * (`karpenter.sh/disruption=disrupting`), and the out-of-service taint. A soft
 * PreferNoSchedule taint (cluster-autoscaler's DeletionCandidateOfClusterAutoscaler) is not a drain.
 */
export const DEFAULT_DRAIN_TAINTS = [
  'node.kubernetes.io/unschedulable:NoSchedule',
  'ToBeDeletedByClusterAutoscaler:NoSchedule',
  'karpenter.sh/disrupted:NoSchedule',
  'karpenter.sh/disruption:NoSchedule',
  'node.kubernetes.io/out-of-service:NoExecute',
];
export const TAINT_EFFECTS = ['NoSchedule', 'NoExecute', 'PreferNoSchedule'] as const;

/**
 * What counts as "the node is draining": `cordon` (default) — spec.unschedulable or a drain taint;
 * `taint` — drain taints only, never a bare cordon (clusters that cordon for other reasons);
 * `eviction` — no node signal at all, only the own pod being deleted.
 */
export const DRAIN_SIGNALS = ['cordon', 'taint', 'eviction'] as const;
export type DrainSignal = (typeof DRAIN_SIGNALS)[number];

export interface SidecarConfig {
  profile: Profile;
  features: FeatureName[];
  podName: string;
  podNamespace: string;
  podUid: string;
  nodeName: string;
  podIPs: string[];
  port: number;
  bindAddress: string;
  /** A second listener serving /metrics only (hostNetwork pods); 0: none. */
  metricsPort: number;
  metricsAddress: string;
  observeOnly: boolean;
  logLevel: LogLevel;
  handoverBudgetSeconds: number;
  drainTaints: string[];
  drainSignal: DrainSignal;
  /** The container the sidecar guards: the speaker for L2, the leader container for leases. */
  guardedContainer: string;
  // L2 handover
  metallbNamespace: string;
  l2Interfaces: string[];
  l2SettleSeconds: number;
  failsafeGraceSeconds: number;
  memberlistPorts: number[];
  /** The speaker runs with MetalLB's --ignore-exclude-lb (the webhook read its args): no L2 handover. */
  speakerIgnoresExcludeLb: boolean;
  /** While the node drains, fence an API server on this node whose etcd member is gone. */
  fenceStaleApiServer: boolean;
  // Lease handover
  leases: string[];
  successorSelector: string;
  identityScheme: IdentityScheme;
  leaderStopTimeoutSeconds: number;
  verifySeconds: number;
  // Netfilter cleanup
  cleanupResyncSeconds: number;
  cleanupConfirmSeconds: number;
  cleanupDryRun: boolean;
}

type Kind = 'string' | 'int' | 'bool' | 'list' | 'enum' | 'enum-list' | 'port-list';

export interface VarSpec {
  env: string;
  key: keyof SidecarConfig;
  kind: Kind;
  description: string;
  /** The pod annotation that sets it (the webhook reads it with this spec's parser). */
  annotation?: string;
  required?: boolean;
  default?: string;
  accepted?: readonly string[];
  min?: number;
  max?: number;
}

/** Every variable of the contract; also the source of the configuration reference in the docs. */
export const CONTRACT: readonly VarSpec[] = [
  {
    env: 'DRAINGUARD_PROFILE',
    key: 'profile',
    kind: 'enum',
    accepted: PROFILES,
    required: true,
    description: 'Which workload the sidecar guards.',
  },
  {
    env: 'DRAINGUARD_FEATURES',
    key: 'features',
    kind: 'enum-list',
    accepted: FEATURES,
    required: true,
    description: 'Features to run, comma-separated.',
  },
  {
    env: 'DRAINGUARD_POD_NAME',
    key: 'podName',
    kind: 'string',
    required: true,
    description: 'Own pod name (downward API metadata.name).',
  },
  {
    env: 'DRAINGUARD_POD_NAMESPACE',
    key: 'podNamespace',
    kind: 'string',
    required: true,
    description: 'Own namespace (downward API metadata.namespace).',
  },
  {
    env: 'DRAINGUARD_POD_UID',
    key: 'podUid',
    kind: 'string',
    default: '',
    description: 'Own pod UID (downward API metadata.uid).',
  },
  {
    env: 'DRAINGUARD_NODE_NAME',
    key: 'nodeName',
    kind: 'string',
    required: true,
    description: 'Node the pod runs on (downward API spec.nodeName).',
  },
  {
    env: 'DRAINGUARD_POD_IPS',
    key: 'podIPs',
    kind: 'list',
    default: '',
    description: 'Own pod IPs (downward API status.podIPs).',
  },
  {
    env: 'DRAINGUARD_PORT',
    key: 'port',
    kind: 'int',
    min: 1,
    max: 65535,
    default: '7480',
    description: 'Port of /healthz /readyz /prestop /metrics.',
  },
  {
    env: 'DRAINGUARD_BIND_ADDRESS',
    key: 'bindAddress',
    kind: 'string',
    default: '0.0.0.0',
    description:
      'Listen address; 127.0.0.1 on hostNetwork pods so /prestop is not reachable from the network.',
  },
  {
    env: 'DRAINGUARD_METRICS_PORT',
    key: 'metricsPort',
    kind: 'int',
    min: 0,
    max: 65535,
    default: '0',
    description:
      'Port of a second listener serving /metrics and nothing else, on DRAINGUARD_METRICS_ADDRESS; 0: none. The webhook sets it on hostNetwork pods, whose main listener is on 127.0.0.1 (pod annotation drainguard.io/metrics-port; default 7490, 7491, 7492, 7493 by profile), and declares it as their container port named drainguard, which a PodMonitor scrapes.',
  },
  {
    env: 'DRAINGUARD_METRICS_ADDRESS',
    key: 'metricsAddress',
    kind: 'string',
    default: '',
    description:
      "Address of the /metrics listener: the node's IP (downward API status.hostIP, rendered whenever DRAINGUARD_METRICS_PORT is).",
  },
  {
    env: 'DRAINGUARD_OBSERVE_ONLY',
    key: 'observeOnly',
    annotation: 'drainguard.io/observe-only',
    kind: 'bool',
    default: 'false',
    description: 'Log and record what would be done; change nothing.',
  },
  {
    env: 'DRAINGUARD_LOG_LEVEL',
    key: 'logLevel',
    annotation: 'drainguard.io/log-level',
    kind: 'enum',
    accepted: LOG_LEVELS,
    default: 'info',
    description: 'Minimum level of the JSON log lines.',
  },
  {
    env: 'DRAINGUARD_HANDOVER_BUDGET_SECONDS',
    key: 'handoverBudgetSeconds',
    annotation: 'drainguard.io/handover-budget-seconds',
    kind: 'int',
    min: 1,
    max: 600,
    default: '30',
    description: 'Upper bound for one handover (L2 or Lease).',
  },
  {
    env: 'DRAINGUARD_DRAIN_TAINTS',
    key: 'drainTaints',
    kind: 'list',
    default: DEFAULT_DRAIN_TAINTS.join(','),
    description: 'Taints that mean the node is draining: key (NoSchedule or NoExecute) or key:Effect.',
  },
  {
    env: 'DRAINGUARD_DRAIN_SIGNAL',
    key: 'drainSignal',
    annotation: 'drainguard.io/drain-signal',
    kind: 'enum',
    accepted: DRAIN_SIGNALS,
    default: 'cordon',
    description:
      'What counts as a drain: cordon (or a drain taint), taint (drain taints only), eviction (own pod deleted only).',
  },
  {
    env: 'DRAINGUARD_GUARDED_CONTAINER',
    key: 'guardedContainer',
    kind: 'string',
    default: '',
    description: 'The container guarded: the speaker (L2) or the leader container (leases).',
  },
  {
    env: 'DRAINGUARD_METALLB_NAMESPACE',
    key: 'metallbNamespace',
    annotation: 'drainguard.io/metallb-namespace',
    kind: 'string',
    default: 'metallb-system',
    description: 'Namespace holding ServiceL2Status objects.',
  },
  {
    env: 'DRAINGUARD_L2_INTERFACES',
    key: 'l2Interfaces',
    annotation: 'drainguard.io/l2-interfaces',
    kind: 'list',
    default: '',
    description:
      'Interfaces to fence, comma-separated (1 to 15 characters: letters, digits, _ . -, starting with a letter; any other name turns the L2 handover off, said in an L2HandoverOff Event); empty = those named in ServiceL2Status, else the links that route the VIPs (chosen at fence time).',
  },
  {
    env: 'DRAINGUARD_L2_SETTLE_SECONDS',
    key: 'l2SettleSeconds',
    kind: 'int',
    min: 0,
    max: 600,
    default: '10',
    description: 'Wait before fencing when MetalLB has no ServiceL2Status (< 0.14.4).',
  },
  {
    env: 'DRAINGUARD_FAILSAFE_GRACE_SECONDS',
    key: 'failsafeGraceSeconds',
    kind: 'int',
    min: 0,
    max: 600,
    default: '5',
    description: 'API unreachable this long while draining: fence anyway and cut memberlist.',
  },
  {
    env: 'DRAINGUARD_MEMBERLIST_PORTS',
    key: 'memberlistPorts',
    annotation: 'drainguard.io/memberlist-ports',
    kind: 'port-list',
    default: '7946',
    description: 'Speaker memberlist ports cut by the fail-safe.',
  },
  {
    env: 'DRAINGUARD_SPEAKER_IGNORES_EXCLUDE_LB',
    key: 'speakerIgnoresExcludeLb',
    kind: 'bool',
    default: 'false',
    description:
      "Set by the webhook when the speaker container's args carry MetalLB's --ignore-exclude-lb: its speakers ignore the exclude label, so the L2 handover is off (an Event and the status annotation say why).",
  },
  {
    env: 'DRAINGUARD_FENCE_STALE_API_SERVER',
    key: 'fenceStaleApiServer',
    annotation: 'drainguard.io/fence-stale-api-server',
    kind: 'bool',
    default: 'true',
    description:
      "While the node drains, an API server on one of the node's addresses (an endpoint of the `kubernetes` Service) that does not answer a consistent read while another API server does, or while the etcd member seen listening on the node's port 2379 no longer listens — its etcd member removed — gets the connections to it closed and new ones refused but from loopback (nft table inet drainguard-api), so that MetalLB's speakers read the exclude label through an up-to-date API server; lifted when the drain ends. The cluster's only API server is never fenced. L2 profile only.",
  },
  {
    env: 'DRAINGUARD_LEASES',
    key: 'leases',
    kind: 'list',
    default: '',
    description: 'Leases to hand over: name or namespace/name, comma-separated.',
  },
  {
    env: 'DRAINGUARD_SUCCESSOR_SELECTOR',
    key: 'successorSelector',
    annotation: 'drainguard.io/successor-selector',
    kind: 'string',
    default: '',
    description: 'Label selector of pods that may take over the Lease.',
  },
  {
    env: 'DRAINGUARD_IDENTITY_SCHEME',
    key: 'identityScheme',
    annotation: 'drainguard.io/identity-scheme',
    kind: 'enum',
    accepted: IDENTITY_SCHEMES,
    default: 'pod-name',
    description:
      'How holderIdentity names a pod: pod-name (its hostname: skupper, most electors), pod-name-prefix (<hostname>_<uuid>: controller-runtime), node-name (its node: kube-vip).',
  },
  {
    env: 'DRAINGUARD_LEADER_STOP_TIMEOUT_SECONDS',
    key: 'leaderStopTimeoutSeconds',
    kind: 'int',
    min: 1,
    max: 600,
    default: '20',
    description: 'How long to wait for the leader container to stop before leaving the Lease to expire.',
  },
  {
    env: 'DRAINGUARD_VERIFY_SECONDS',
    key: 'verifySeconds',
    kind: 'int',
    min: 1,
    max: 600,
    default: '10',
    description: 'How long to wait for the successor to renew.',
  },
  {
    env: 'DRAINGUARD_CLEANUP_RESYNC_SECONDS',
    key: 'cleanupResyncSeconds',
    kind: 'int',
    min: 1,
    max: 86400,
    default: '60',
    description: 'Periodic netfilter cleanup pass.',
  },
  {
    env: 'DRAINGUARD_CLEANUP_CONFIRM_SECONDS',
    key: 'cleanupConfirmSeconds',
    kind: 'int',
    min: 0,
    max: 3600,
    default: '2',
    description: 'Minimum time between the two passes that must both see a rule stale.',
  },
  {
    env: 'DRAINGUARD_CLEANUP_DRY_RUN',
    key: 'cleanupDryRun',
    annotation: 'drainguard.io/cleanup-dry-run',
    kind: 'bool',
    default: 'false',
    description: 'Report stale netfilter state without deleting it.',
  },
];

const SPECS = new Map(CONTRACT.map((v) => [v.key, v]));
/** The spec of one variable, by its key. */
export const specOf = (key: keyof SidecarConfig): VarSpec => SPECS.get(key) as VarSpec;
