// Names more than one role uses: labels and annotations on Nodes and Pods, the injected
// container's name, the nft table of the L2 fence, the version. The webhook writes some, the
// sidecar others, and the CLI reads or removes them all; they live here so no role imports
// another's internals for a string.

/** Every annotation drainguard reads or writes starts with this (`drainguard reset` removes them). */
export const ANNOTATION_PREFIX = 'drainguard.io/';

/** Pod annotations: what a pod author may set, and what the webhook records. */
export const ANNOTATIONS = {
  profile: 'drainguard.io/profile',
  sidecarMode: 'drainguard.io/sidecar-mode',
  port: 'drainguard.io/port',
  /** hostNetwork pods: the port of the /metrics-only listener on the node's IP. */
  metricsPort: 'drainguard.io/metrics-port',
  leases: 'drainguard.io/leases',
  leaderContainer: 'drainguard.io/leader-container',
  guardedContainer: 'drainguard.io/guarded-container',
  netfilterCleanup: 'drainguard.io/netfilter-cleanup',
  /** Written by the webhook: what was injected (idempotency guard). */
  injected: 'drainguard.io/status',
  /** Written by the webhook: terminationGracePeriodSeconds before it was raised. */
  originalGrace: 'drainguard.io/original-termination-grace-period-seconds',
} as const;

/** Namespace label that opts a namespace in to injection. */
export const INJECT_LABEL = 'drainguard.io/inject';
/** The injected container. */
export const SIDECAR_NAME = 'drainguard';

/** The well-known Node label MetalLB's speakers honour: no L2 announcement from this node. */
export const EXCLUDE_LABEL = 'node.kubernetes.io/exclude-from-external-load-balancers';
/** Node annotation: drainguard added EXCLUDE_LABEL (so only then it, or `reset`, removes it). */
export const LABEL_OWNED_ANNOTATION = 'drainguard.io/exclude-label-added';
/** Node annotation: the sidecar's L2 handover state (JSON), read back on restart and by `status`. */
export const L2_STATE_ANNOTATION = 'drainguard.io/l2-handover';

/** The nft table (netdev and inet families) of the L2 fence. */
export const FENCE_TABLE = 'drainguard';
/**
 * The nft table (inet) that refuses other hosts' connections to a stale API server on a draining
 * node (sidecar/api-fence/fence.ts). Apart from the L2 fence: each is replaced whole on its own.
 */
export const API_FENCE_TABLE = 'drainguard-api';

// Replaced at bundle time by esbuild's define; from source it is the package version.
declare const __DRAINGUARD_VERSION__: string | undefined;
export const VERSION: string =
  typeof __DRAINGUARD_VERSION__ === 'string' ? __DRAINGUARD_VERSION__ : '0.1.0-dev';
