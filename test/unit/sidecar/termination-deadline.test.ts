// How long the sidecar has after SIGTERM: the deletion's grace, the pod's, or the budget.
import t from 'tap';
import type { Pod } from '../../../shared/kube/types.ts';
import { terminationDeadline } from '../../../sidecar/drain/state.ts';

const AT = Date.parse('2026-11-24T12:00:00Z');

t.test('terminationDeadline: deletion grace, then the pod spec, then the fallback', async (t) => {
  t.equal(terminationDeadline(undefined, AT, 30), AT + 30_000, 'own Pod unknown: the fallback');
  const pod: Pod = { spec: { terminationGracePeriodSeconds: 10 } };
  t.equal(terminationDeadline(pod, AT, 30), AT + 10_000);
  const deleted: Pod = { ...pod, metadata: { deletionGracePeriodSeconds: 4 } };
  t.equal(terminationDeadline(deleted, AT, 30), AT + 4_000, 'kubectl delete --grace-period=4');
  t.equal(
    terminationDeadline({ ...pod, metadata: { deletionGracePeriodSeconds: 0 } }, AT, 30),
    AT,
    'a force delete leaves no time',
  );
});

t.test(
  'terminationDeadline: the deletionTimestamp counts once a preStop hook spent part of the grace',
  async (t) => {
    const pod = (deletionTimestamp: string): Pod => ({
      metadata: { deletionTimestamp, deletionGracePeriodSeconds: 30 },
    });
    t.equal(terminationDeadline(pod('2026-11-24T12:00:12Z'), AT, 30), AT + 12_000);
    // Another clock's timestamp outside the window is not trusted.
    t.equal(terminationDeadline(pod('2026-11-24T11:59:00Z'), AT, 30), AT + 30_000);
    t.equal(terminationDeadline(pod('2026-11-24T12:05:00Z'), AT, 30), AT + 30_000);
  },
);
