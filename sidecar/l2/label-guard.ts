// The exclude label while fenced, pure. The fence drops this node's ARP/NA for the VIPs handed over
// on the premise that MetalLB keeps this node out of every election, and the label is what does
// that. A user or a label-reconciling tool (GitOps, a node-label sync) may remove it mid-drain:
// every speaker then reprocesses its services, may elect this node again, and its speaker announces
// behind the fence — dark until the uncordon (issue 42, item 5). So the label is put back at once
// (marked drainguard's: taken off at the drain's end), with a Warning Event, and an Event again
// when it is seen back. The VIPs are not unfenced instead: the only sign that MetalLB elected this
// node again is its own ServiceL2Status, which lingers for a stale speaker (the case the fence is
// for); answering for it would answer beside the new owner.
import { EXCLUDE_LABEL } from '../../shared/names.ts';

export const LABEL_EVENT_REASONS = {
  /** The exclude label vanished from the Node while it is fenced: put back (Warning). */
  labelRemoved: 'L2ExcludeLabelRemoved',
  /** The exclude label is on the Node again after it vanished under the fence. */
  labelRestored: 'L2ExcludeLabelRestored',
} as const;

export interface FencedLabel {
  /** Label the Node now. */
  relabel: boolean;
  /** Since when the label has been missing (undefined: it is on, or not known). */
  lostAt: number | undefined;
  event?: {
    type: 'Normal' | 'Warning';
    reason: (typeof LABEL_EVENT_REASONS)[keyof typeof LABEL_EVENT_REASONS];
    message: string;
  };
}

/**
 * Fenced: what to do about the exclude label, from when it was last seen missing (`lostAt`) and
 * the Node as observed now. Nothing is concluded from a view not synced; the label is written only
 * while the API answers (asked again on every reconcile until it is seen).
 */
export function fencedLabel(
  lostAt: number | undefined,
  o: { now: number; synced: boolean; apiUp: boolean; excludeLabel: boolean },
  nodeName: string,
): FencedLabel {
  if (!o.synced) return { relabel: false, lostAt };
  if (o.excludeLabel) {
    if (lostAt === undefined) return { relabel: false, lostAt };
    return {
      relabel: false,
      lostAt: undefined,
      event: {
        type: 'Normal',
        reason: LABEL_EVENT_REASONS.labelRestored,
        message: `exclude label ${EXCLUDE_LABEL} back on node ${nodeName} after ${((o.now - lostAt) / 1000).toFixed(1)} s: MetalLB keeps this node out of its elections again`,
      },
    };
  }
  return {
    relabel: o.apiUp,
    lostAt: lostAt ?? o.now,
    ...(lostAt === undefined
      ? {
          event: {
            type: 'Warning' as const,
            reason: LABEL_EVENT_REASONS.labelRemoved,
            message: `exclude label ${EXCLUDE_LABEL} removed from node ${nodeName} under the fence (by a user or a tool): MetalLB may elect this node again, and its speaker would announce behind the fence (dark until the uncordon); put back`,
          },
        }
      : {}),
  };
}
