import t from 'tap';
import { formatRows, rowsOf } from '../../../cli/l2-status.ts';
import { buildStatus } from '../../../cli/status.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION, LABEL_OWNED_ANNOTATION } from '../../../shared/names.ts';
import { fencedL2Status } from './l2-state-fixture.ts';

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

t.test(
  'drainguard status: interfaces missing on the node and a fail-safe fence kept until the drain ends are shown',
  async (t) => {
    const now = Date.parse('2026-11-22T00:10:30Z');
    const node = (name: string, over: Parameters<typeof fencedL2Status>[1]) => ({
      metadata: {
        name,
        labels: { [EXCLUDE_LABEL]: '' },
        annotations: {
          [LABEL_OWNED_ANNOTATION]: 'true',
          [L2_STATE_ANNOTATION]: JSON.stringify(
            fencedL2Status({ vip: '192.0.2.100', since: '2026-11-22T00:10:00.000Z' }, over),
          ),
        },
      },
      spec: { unschedulable: true },
    });
    const rows = rowsOf([
      node('node-a', { interfaces: ['ens9', 'eth0'], missingInterfaces: ['ens9'] }),
      node('node-b', {
        memberlistCut: true,
        failsafeDrop: 'pools',
        failsafeKept: 'fail-safe fence and memberlist cut kept until the drain ends: …',
      }),
    ]);
    const lines = formatRows(rows, now).trimEnd().split('\n');
    t.match(lines[1] ?? '', /^node-a\s.*\sfenced\s.*\seth0 \(missing: ens9\)$/);
    t.match(
      lines[2] ?? '',
      /^node-b\s.*\sfenced \(fail-safe kept until the drain ends\)\s.*\sfail-safe eth0 \+ memberlist cut$/,
    );
    const nodes = [node('node-b', { memberlistCut: true, failsafeKept: 'kept' })];
    t.equal(
      buildStatus({ nodes, pods: [], leases: new Map(), events: [] }).nodes[0]?.fence,
      'failsafe',
      "status --json: a kept fail-safe fence is the fail-safe's",
    );
  },
);
