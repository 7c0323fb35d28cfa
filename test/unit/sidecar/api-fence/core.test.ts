import t from 'tap';
import { ApiError } from '../../../../shared/kube/api-error.ts';
import {
  apiEndpointsOf,
  classifyLocalRead,
  decideApiFence,
  ETCD_GONE_READ_MS,
  etcdGoneLongEnough,
  etcdGoneWhileSilent,
  fenceWanted,
  LOCAL_READ_TIMEOUT_MS,
  type LocalEtcdView,
  localApiEndpoints,
  NO_LOCAL_ETCD,
  nextLocalEtcd,
  PROBE_INTERVAL_MS,
  probeDue,
  STILL_SILENT_MS,
  type StaleApiObservation,
  silentWhileOthersAnswer,
} from '../../../../sidecar/api-fence/core.ts';

const ep = { address: '10.0.0.1', port: 6443 };

t.test(
  "the API servers on this node: the `kubernetes` slices' addresses that are the node's own",
  async (t) => {
    const slices = [
      {
        addressType: 'IPv4',
        endpoints: [{ addresses: ['10.0.0.1'] }, { addresses: ['10.0.0.2'] }, { addresses: ['10.0.0.3'] }],
        ports: [{ name: 'https', port: 6443, protocol: 'TCP' }],
      },
      { addressType: 'IPv6', endpoints: [{ addresses: ['FD00::1'] }], ports: [{ port: 6443 }] },
      { endpoints: null, ports: null },
    ];
    t.strictSame(localApiEndpoints(slices, ['10.0.0.1', 'fd00::1', '198.51.100.1']), [
      ep,
      { address: 'fd00::1', port: 6443 },
    ]);
    t.strictSame(localApiEndpoints(slices, ['10.0.0.9']), [], 'a worker: none');
    t.strictSame(
      apiEndpointsOf(slices, ['10.0.0.1']).others,
      [
        { address: '10.0.0.2', port: 6443 },
        { address: '10.0.0.3', port: 6443 },
        { address: 'fd00::1', port: 6443 },
      ],
      'the API servers on other hosts, asked directly for the proof',
    );
  },
);

t.test('what a local consistent read says of the server', async (t) => {
  const err = (code: number, msg: string) => new ApiError('GET', '/api/v1/nodes/cp-1', code, '', msg);
  t.equal(classifyLocalRead(undefined), 'answered');
  t.equal(classifyLocalRead(err(404, 'not found')), 'answered', 'a 404 came from etcd');
  t.equal(classifyLocalRead(err(0, 'timed out after 750 ms')), 'no-answer', 'a stale server holds it');
  t.equal(classifyLocalRead(err(504, 'Timeout: request did not complete within 1m0s')), 'no-answer');
  t.equal(classifyLocalRead(err(500, 'resource quota evaluation timed out')), 'no-answer');
  t.equal(
    classifyLocalRead(err(0, 'connect ECONNREFUSED 10.0.0.1:6443')),
    'refused',
    'no server: nothing to fence',
  );
  t.equal(classifyLocalRead(err(403, 'forbidden')), 'unknown');
  t.equal(classifyLocalRead(err(429, 'too many requests')), 'unknown', 'shedding load is not stale');
  t.equal(classifyLocalRead(err(0, 'self-signed certificate')), 'unknown', 'a TLS failure proves nothing');
  t.equal(classifyLocalRead(new Error('no credentials')), 'unknown');
});

const base: StaleApiObservation = {
  now: 10_000,
  wanted: true,
  enabled: true,
  endpoints: [ep],
  others: [{ address: '10.0.0.2', port: 6443 }],
  probe: undefined,
  installed: undefined,
};
const stale = {
  at: 9_000,
  local: 'no-answer' as const,
  clusterAnswered: true,
  detail: 'timed out after 750 ms',
};

t.test(
  'fenced only when proven stale: no answer here while the cluster answers, during a drain',
  async (t) => {
    t.strictSame(decideApiFence({ ...base, probe: stale }), {
      kind: 'fence',
      endpoints: [ep],
      why: 'timed out after 750 ms',
    });
    t.equal(decideApiFence(base), undefined, 'no probe yet');
    t.equal(
      decideApiFence({ ...base, probe: { ...stale, clusterAnswered: false } }),
      undefined,
      'the whole API fails (an etcd election): not this server alone',
    );
    t.equal(
      decideApiFence({ ...base, probe: { at: 9_000, local: 'refused' } }),
      undefined,
      'stopped: no clients',
    );
    t.equal(decideApiFence({ ...base, probe: { at: 9_000, local: 'unknown' } }), undefined);
    t.equal(decideApiFence({ ...base, probe: stale, wanted: false }), undefined, 'not draining');
    t.equal(decideApiFence({ ...base, probe: stale, enabled: false }), undefined, 'turned off');
    t.equal(decideApiFence({ ...base, probe: stale, endpoints: [] }), undefined, 'no API server here');
  },
);

t.test('the only API server (no other host has one) is never fenced, however slow', async (t) => {
  // A single control plane drained: its one API server slow on a consistent read (an etcd fsync
  // stall), then answering the same read through the `kubernetes` Service — the same server.
  // Fenced, it would cut every pod and remote client off the cluster's only API server until the
  // drain ends, and the sidecar could not see that end through it.
  t.equal(decideApiFence({ ...base, others: [], probe: stale }), undefined);
  t.notOk(probeDue({ ...base, others: [] }, 0), 'not even asked');
});

t.test('lifted when the drain ends or when turned off; kept otherwise, answering again too', async (t) => {
  const fenced = { ...base, installed: [ep] };
  t.match(decideApiFence({ ...fenced, wanted: false, probe: stale }), {
    kind: 'unfence',
    why: 'the drain is over',
  });
  t.match(decideApiFence({ ...fenced, enabled: false }), { kind: 'unfence' });
  t.equal(
    decideApiFence({ ...fenced, probe: { at: 9_500, local: 'answered' } }),
    undefined,
    'answering again is no proof its watches work (a member added back: its watch cache may stay frozen)',
  );
  t.equal(decideApiFence({ ...fenced, probe: stale }), undefined, 'still stale: kept, not re-installed');
  t.equal(decideApiFence({ ...fenced, probe: { at: 9_500, local: 'refused' } }), undefined);
  t.match(
    decideApiFence({ ...fenced, probe: stale, endpoints: [ep, { address: 'fd00::1', port: 6443 }] }),
    { kind: 'fence' },
    'a second address of this node found since: fenced too',
  );
  t.equal(
    decideApiFence({ ...fenced, probe: stale, endpoints: [] }),
    undefined,
    'the endpoints read empty later: the fence stays',
  );
});

t.test(
  'wanted while the node drains or the pod goes away, not for a restart of the speaker alone',
  async (t) => {
    t.ok(fenceWanted(true, false));
    t.ok(fenceWanted(false, true));
    t.notOk(
      fenceWanted(false, false),
      "the guarded container's restart (current.draining) is not the node's drain",
    );
  },
);

t.test('probed only while draining with an API server here, until it is fenced', async (t) => {
  t.ok(probeDue(base, 10_000 - PROBE_INTERVAL_MS));
  t.notOk(probeDue(base, 10_000 - PROBE_INTERVAL_MS + 1));
  t.notOk(probeDue({ ...base, wanted: false }, 0));
  t.notOk(probeDue({ ...base, endpoints: [] }, 0));
  t.notOk(probeDue({ ...base, enabled: false }, 0));
  t.notOk(probeDue({ ...base, installed: [ep] }, 0), 'fenced: not asked any more');
});

t.test(
  'a local read held through an etcd election: judged once the others answer and it stays silent',
  async (t) => {
    // The removed member led etcd: every API server is out for the election (0.2–1.45 s here). A read
    // sent at 0.25 s to the local (stale) server is still unanswered when the others answer again.
    t.notOk(silentWhileOthersAnswer(1_000, 250, undefined), 'nobody answered yet: the whole API is out');
    t.notOk(
      silentWhileOthersAnswer(1_500, 250, 1_450),
      'the others answered 50 ms ago: a healthy local one may too',
    );
    t.ok(
      silentWhileOthersAnswer(1_450 + STILL_SILENT_MS, 250, 1_450),
      `${STILL_SILENT_MS} ms silent after them`,
    );
    t.notOk(
      silentWhileOthersAnswer(1_000, 900, 950),
      `held less than LOCAL_READ_TIMEOUT_MS (${LOCAL_READ_TIMEOUT_MS} ms)`,
    );
    t.ok(silentWhileOthersAnswer(900 + LOCAL_READ_TIMEOUT_MS, 900, 950));
    t.notOk(
      silentWhileOthersAnswer(5_000, 2_000, 1_900),
      'an answer of the others from before it was sent counts not',
    );
  },
);

t.test('the local etcd member: seen listening, then gone, across checks', async (t) => {
  let v: LocalEtcdView = NO_LOCAL_ETCD;
  v = nextLocalEtcd(v, 'gone', 100);
  t.strictSame(v, NO_LOCAL_ETCD, 'never seen listening (a worker, or an external etcd): no news');
  v = nextLocalEtcd(v, 'listening', 200);
  t.strictSame(v, { seenListening: true, goneSince: undefined });
  v = nextLocalEtcd(v, 'gone', 300);
  t.strictSame(v, { seenListening: true, goneSince: 300 }, 'gone from the first check that found none');
  v = nextLocalEtcd(v, 'gone', 400);
  t.equal(v.goneSince, 300, 'still gone: since the first');
  t.equal(
    nextLocalEtcd(v, 'unknown', 500).goneSince,
    undefined,
    'a check that could not read breaks the run',
  );
  t.strictSame(nextLocalEtcd(v, 'listening', 500), { seenListening: true, goneSince: undefined }, 'back');
});

t.test(
  'a local read held while the etcd member here is gone: stale without waiting for the others',
  async (t) => {
    // The removed member led etcd: the others are out for the election (~1.3 s here) and cannot
    // answer; the member on this node applied its own removal and exited at 400 ms.
    const gone: LocalEtcdView = { seenListening: true, goneSince: 400 };
    t.ok(
      etcdGoneWhileSilent(400 + ETCD_GONE_READ_MS, 300, gone),
      `gone ${ETCD_GONE_READ_MS} ms, held longer`,
    );
    t.notOk(etcdGoneWhileSilent(400 + ETCD_GONE_READ_MS - 1, 300, gone), 'gone not long enough');
    t.notOk(
      etcdGoneWhileSilent(700, 600, gone),
      `a read sent ${ETCD_GONE_READ_MS} ms ago or less: a healthy server with another etcd may still answer`,
    );
    t.notOk(
      etcdGoneWhileSilent(5_000, 300, { seenListening: false, goneSince: undefined }),
      'no etcd ever seen here: only the others can prove it',
    );
    t.notOk(etcdGoneWhileSilent(5_000, 300, { seenListening: true, goneSince: undefined }), 'it listens');
    t.ok(
      etcdGoneLongEnough(400 + ETCD_GONE_READ_MS, gone),
      'a read that failed (5xx) meanwhile: however fast',
    );
    t.notOk(etcdGoneLongEnough(400 + ETCD_GONE_READ_MS - 1, gone));
    t.notOk(etcdGoneLongEnough(5_000, { seenListening: false, goneSince: 400 }), 'never seen listening');

    const byEtcd = { at: 300, local: 'no-answer' as const, etcdGone: true, detail: 'no answer in 350 ms' };
    t.strictSame(
      decideApiFence({ ...base, probe: byEtcd }),
      { kind: 'fence', endpoints: [ep], why: 'no answer in 350 ms' },
      'fenced with no answer from the others',
    );
    t.equal(
      decideApiFence({ ...base, probe: byEtcd, others: [] }),
      undefined,
      'the only API server: never, its etcd gone or not',
    );
    t.equal(
      decideApiFence({ ...base, probe: { ...byEtcd, local: 'answered' } }),
      undefined,
      'it answered (its --etcd-servers names other members): not stale',
    );
  },
);
