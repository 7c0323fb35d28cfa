// The L2 sidecar's Node annotation (drainguard.io/l2-handover) as a fenced node publishes it,
// for the tests of what `drainguard status` and `reset` read: one shape, kept with the format.
import type { L2State } from '../../../shared/l2-state.ts';

/** Fenced since `since`: web/www's VIP `vip` handed to node `to`, the fence on eth0; `over` changes any field. */
export function fencedL2Status(
  opts: { vip?: string; to?: string; since?: string } = {},
  over: Partial<L2State> = {},
): L2State {
  const vip = opts.vip ?? '198.51.100.100';
  return {
    phase: 'fenced',
    since: opts.since ?? '2026-11-22T01:00:00.000Z',
    vips: [vip],
    services: [{ service: 'web/www', ips: [vip] }],
    handedTo: { 'web/www': opts.to ?? 'node-b' },
    fenced: true,
    failsafe: false,
    interfaces: ['eth0'],
    ...over,
  };
}
