// What a Lease handover reports (per Lease, to /prestop and the logs) and the metrics it counts.
import type { MetricSpec } from '../metrics.ts';
import type { LeaseRef } from './core.ts';

export type Outcome =
  | 'handed-over'
  | 'handed-over-unverified'
  | 'released'
  | 'not-holder'
  | 'pod-replaced'
  | 'holder-changed'
  | 'leader-still-running'
  | 'lease-missing'
  | 'observed'
  | 'identity-shared'
  | 'api-failed';

export interface LeaseResult {
  lease: string;
  outcome: Outcome;
  successor?: string;
  detail?: string;
  /** From "leader container stopped" to the Lease write. */
  writeMs?: number;
  /** From the write to the successor's first renew (or anybody's acquire after a release). */
  verifyMs?: number;
}

export const leasePath = (r: LeaseRef) =>
  `/apis/coordination.k8s.io/v1/namespaces/${r.namespace}/leases/${r.name}`;
export const refName = (r: LeaseRef) => `${r.namespace}/${r.name}`;

export const LEASE_METRICS = {
  handovers: {
    kind: 'counter',
    name: 'drainguard_lease_handovers_total',
    help: 'Lease handover attempts by lease and outcome.',
  },
  durations: {
    kind: 'histogram',
    name: 'drainguard_lease_handover_seconds',
    help: 'From the leader container stopping to the successor taking the Lease up.',
    buckets: [0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20],
  },
  holder: {
    kind: 'gauge',
    name: 'drainguard_lease_holder',
    help: '1 when this pod holds the Lease (as last observed).',
  },
  synced: {
    kind: 'gauge',
    name: 'drainguard_lease_synced',
    help: '1 once the Lease has been read since the last failure.',
  },
} as const satisfies Record<string, MetricSpec>;
