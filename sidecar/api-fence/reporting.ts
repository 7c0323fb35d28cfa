// What the stale API server's fence reports: its Event reasons (on the Node) and its metrics.
import type { MetricSpec } from '../metrics.ts';

export const STALE_API_EVENT_REASONS = {
  fenced: 'StaleApiServerFenced',
  unfenced: 'StaleApiServerUnfenced',
} as const;

export const STALE_API_METRICS = {
  fenced: {
    kind: 'gauge',
    name: 'drainguard_stale_api_server_fenced',
    help: "1 while this node's own API server is fenced as stale (connections to it refused but from loopback).",
  },
  closed: {
    kind: 'counter',
    name: 'drainguard_stale_api_server_connections_closed_total',
    help: "Connections to this node's stale API server destroyed by its fence.",
  },
  probes: {
    kind: 'counter',
    name: 'drainguard_stale_api_server_probes_total',
    help: "Consistent reads of the own Node from this node's own API server while it drains, by answer.",
  },
} as const satisfies Record<string, MetricSpec>;
