// Just the shapes drainguard reads; full API types would cost the sidecar memory for nothing.
export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  deletionTimestamp?: string;
  /** The grace period of the deletion under way (`kubectl delete --grace-period`). */
  deletionGracePeriodSeconds?: number;
  creationTimestamp?: string;
  ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }[];
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  [k: string]: unknown;
}

export interface KubeList<T = KubeObject> {
  metadata?: { resourceVersion?: string; continue?: string };
  items?: T[];
}

export interface Taint {
  key: string;
  value?: string;
  effect: string;
}

export interface Node extends KubeObject {
  spec?: { unschedulable?: boolean; taints?: Taint[]; podCIDR?: string; podCIDRs?: string[] };
  status?: {
    addresses?: { type: string; address: string }[];
    conditions?: { type: string; status: string }[];
    nodeInfo?: { kubeletVersion?: string };
  };
}

export interface ContainerStatus {
  name: string;
  ready?: boolean;
  /** `<runtime>://<id>`, e.g. containerd://0123…; absent until the container was created. */
  containerID?: string;
  restartCount?: number;
  state?: { running?: object; terminated?: { exitCode?: number; finishedAt?: string }; waiting?: object };
}

export interface Pod extends KubeObject {
  spec?: {
    nodeName?: string;
    hostNetwork?: boolean;
    hostname?: string;
    containers?: { name: string }[];
    [k: string]: unknown;
  };
  status?: {
    phase?: string;
    podIP?: string;
    podIPs?: { ip: string }[];
    conditions?: { type: string; status: string }[];
    containerStatuses?: ContainerStatus[];
    initContainerStatuses?: ContainerStatus[];
  };
}

export interface Lease extends KubeObject {
  spec?: {
    holderIdentity?: string | null;
    leaseDurationSeconds?: number;
    acquireTime?: string | null;
    renewTime?: string | null;
    leaseTransitions?: number;
    strategy?: string;
    preferredHolder?: string;
  };
}

/** RFC 3339 with exactly six fractional digits: the API server rejects other MicroTime forms. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
