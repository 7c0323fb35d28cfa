// What the planner and its steps share: the request and options plan() takes, the Plan it gives,
// and how a step answers. Each step takes plain data and returns its result or a Stop: a Denial
// (plan() refuses the pod) or a Skip (plan() allows it unchanged). No step does I/O.
import type { Profile } from '../../shared/contract.ts';
import type { PatchOp } from './json-patch.ts';

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

export type Obj = Record<string, unknown>;
export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
export const strMap = (v: unknown): Record<string, string> => {
  if (!isObj(v)) return {};
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) if (typeof x === 'string') out[k] = x;
  return out;
};

export interface ContainerLike extends Obj {
  name?: unknown;
  ports?: unknown;
  lifecycle?: unknown;
}

/** The pod is refused: plan() answers 400 with this message (and the profile, once it is known). */
export interface Denial {
  denied: string;
}
/** The pod is left as it is: plan() allows it with this outcome (a metrics label) and these warnings. */
export interface Skip {
  skip: string;
  warnings?: string[];
}
export type Stop = Denial | Skip;
/** A step's answer: its result, or where plan() stops. */
export type Step<T> = T | Stop;

export const denial = (message: string): Denial => ({ denied: message });
export const skip = (outcome: string, warnings?: string[]): Skip =>
  warnings ? { skip: outcome, warnings } : { skip: outcome };
export const isStop = (r: unknown): r is Stop => isObj(r) && ('denied' in r || 'skip' in r);
