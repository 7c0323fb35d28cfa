import t from 'tap';
import { formatRows, rowsOf } from '../../../cli/l2-status.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION, LABEL_OWNED_ANNOTATION } from '../../../shared/names.ts';
import { fencedL2Status } from '../cli/l2-state-fixture.ts';

t.test('drainguard status: one row per node from labels and the status annotation', async (t) => {
  const now = Date.parse('2026-11-22T00:10:30Z');
  const status = fencedL2Status({ vip: '192.0.2.100', since: '2026-11-22T00:10:00.000Z' });
  const rows = rowsOf([
    { metadata: { name: 'node-c', labels: { [EXCLUDE_LABEL]: '' } } },
    {
      metadata: {
        name: 'node-a',
        labels: { [EXCLUDE_LABEL]: '' },
        annotations: { [LABEL_OWNED_ANNOTATION]: 'true', [L2_STATE_ANNOTATION]: JSON.stringify(status) },
      },
      spec: { unschedulable: true },
    },
    { metadata: { name: 'node-b', annotations: { [L2_STATE_ANNOTATION]: 'garbage' } } },
  ]);
  t.strictSame(
    rows.map((r) => [r.node, r.excludeLabel, r.status?.phase]),
    [
      ['node-a', 'drainguard', 'fenced'],
      ['node-b', 'none', undefined],
      ['node-c', 'pre-existing', undefined],
    ],
  );
  const text = formatRows(rows, now);
  const lines = text.trimEnd().split('\n');
  t.match(lines[0] ?? '', /^NODE\s+CORDONED\s+EXCLUDE-LABEL\s+L2-PHASE\s+SINCE\s+VIPS\s+HANDED-TO\s+FENCE$/);
  t.match(lines[1] ?? '', /^node-a\s+yes\s+drainguard\s+fenced\s+30s\s+192\.0\.2\.100\s+node-b\s+eth0$/);
  t.match(lines[3] ?? '', /^node-c\s+no\s+pre-existing\s+-/);
});
