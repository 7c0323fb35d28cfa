// The L2 handover state of every node, as the sidecars publish it in the Node annotation
// drainguard.io/l2-handover: rows and table, pure (`drainguard status` prints them).

import type { Node } from '../shared/kube/types.ts';
import { type L2State, parseL2State } from '../shared/l2-state.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION, LABEL_OWNED_ANNOTATION } from '../shared/names.ts';
import { formatTable } from '../shared/table.ts';

export interface NodeRow {
  node: string;
  cordoned: boolean;
  excludeLabel: 'none' | 'drainguard' | 'pre-existing';
  status: L2State | undefined;
}

export function rowsOf(nodes: Node[]): NodeRow[] {
  return nodes
    .map((n) => {
      const labels = n.metadata?.labels ?? {};
      const annotations = n.metadata?.annotations ?? {};
      const label: NodeRow['excludeLabel'] = !(EXCLUDE_LABEL in labels)
        ? 'none'
        : annotations[LABEL_OWNED_ANNOTATION] === 'true'
          ? 'drainguard'
          : 'pre-existing';
      return {
        node: n.metadata?.name ?? '',
        cordoned: Boolean(n.spec?.unschedulable),
        excludeLabel: label,
        status: parseL2State(annotations[L2_STATE_ANNOTATION]),
      };
    })
    .sort((a, b) => a.node.localeCompare(b.node));
}

export function formatRows(rows: NodeRow[], now: number): string {
  const header = ['NODE', 'CORDONED', 'EXCLUDE-LABEL', 'L2-PHASE', 'SINCE', 'VIPS', 'HANDED-TO', 'FENCE'];
  const ago = (iso: string | undefined) => {
    const t = iso ? Date.parse(iso) : Number.NaN;
    if (Number.isNaN(t)) return '-';
    const s = Math.max(0, Math.round((now - t) / 1000));
    return s < 120 ? `${s}s` : s < 7200 ? `${Math.round(s / 60)}m` : `${Math.round(s / 3600)}h`;
  };
  const table = rows.map((r) => {
    const s = r.status;
    const phase = s
      ? `${s.phase}${s.observeOnly ? ' (observe-only)' : ''}${s.stranded ? ' (no other node)' : ''}${s.gaveUp ? ' (unconfirmed, gave up)' : ''}${s.disabled ? ` (handover off: ${s.disabled.startsWith('DRAINGUARD_L2_INTERFACES') ? 'bad DRAINGUARD_L2_INTERFACES' : '--ignore-exclude-lb'})` : ''}${s.failsafeKept ? ' (fail-safe kept until the drain ends)' : ''}`
      : '-';
    const handed = s ? [...new Set(Object.values(s.handedTo))].join(',') || '-' : '-';
    return [
      r.node,
      r.cordoned ? 'yes' : 'no',
      r.excludeLabel,
      phase,
      ago(s?.since),
      s?.vips.join(',') || '-',
      handed,
      s ? fenceText(s) : '-',
    ];
  });
  return `${formatTable([header, ...table])}\n`;
}

/** The FENCE column: where it is installed, whether it is the fail-safe's (with its memberlist cut and the VIPs it holds), and named interfaces the node lacks. */
function fenceText(s: L2State): string {
  const gone = s.missingInterfaces ?? [];
  const missing = gone.length > 0 ? ` (missing: ${gone.join(',')})` : '';
  if (!s.fenced) return `-${missing}`;
  const failsafe = s.failsafe || s.failsafeKept ? 'fail-safe ' : '';
  // A fenced interface that vanished since is not fenced any more: listed as missing only.
  const on = s.interfaces.filter((i) => !gone.includes(i)).join(',') || '(none)';
  const held = s.held && s.held.length > 0 ? ` (holding ${s.held.join(',')} until claimed)` : '';
  return `${failsafe}${on}${s.memberlistCut ? ' + memberlist cut' : ''}${held}${missing}`;
}
