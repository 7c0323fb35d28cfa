// The client-go candidate simulator itself, against the real API server, with short timings:
// the benchmark and the handover tests are only as good as its fidelity.
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { type ControlPlane, sharedControlPlane } from '../../../lab/bed/control-plane.ts';
import { LeaseCandidate, splitBrain } from '../../../lab/sim/lease-candidate.ts';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { Lease } from '../../../shared/kube/types.ts';
import { microTime } from '../../../shared/kube/types.ts';

const T = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 400, jitterFactor: 1.2 };
const maxRetry = T.retryPeriodMs * (1 + T.jitterFactor);

let cp: ControlPlane;
let client: KubeClient;
t.before(async () => {
  cp = await sharedControlPlane();
  client = cp.client();
});
t.teardown(async () => {
  client?.close();
  await cp?.stop();
});

async function setup(releaseOnStop = false) {
  const ns = `cand-${randomBytes(3).toString('hex')}`;
  await client.create('/api/v1/namespaces', { metadata: { name: ns } });
  const mk = (identity: string) =>
    new LeaseCandidate({ client, namespace: ns, lease: 'l', identity, releaseOnStop, ...T });
  const path = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/l`;
  return { ns, mk, read: () => client.get<Lease>(path), path };
}

/** `a` starts and leads; then `b` starts and tries `tries` times (to win nothing while a renews). */
async function leaderAndContender(a: LeaseCandidate, b: LeaseCandidate, tries = 2): Promise<void> {
  a.start();
  await waitFor('a leading', () => a.leading, { timeoutMs: 5_000 });
  b.start();
  await waitFor('b tried', () => b.attempts >= tries, { timeoutMs: 5_000 });
}

t.test('first candidate creates the Lease and leads; the other waits while it renews', async (t) => {
  const { mk, read } = await setup();
  const a = mk('a');
  const b = mk('b');
  try {
    a.start();
    await waitFor('a leading', () => a.leading, { timeoutMs: 5_000 });
    b.start();
    const first = (await read()).spec?.renewTime;
    await waitFor(
      'a renewed twice',
      async () => (await read()).spec?.renewTime !== first && a.attempts >= 3,
      {
        timeoutMs: 5_000,
      },
    );
    await waitFor('b tried a few times', () => b.attempts >= 4, { timeoutMs: 10_000 });
    t.equal(b.leading, false);
    const l = await read();
    t.equal(l.spec?.holderIdentity, 'a');
    t.equal(l.spec?.leaseDurationSeconds, 3);
    t.match(l.spec?.renewTime ?? '', /\.\d{6}Z$/);
  } finally {
    await a.stop();
    await b.stop();
  }
});

t.test(
  'leader exits without release: the other takes over only after the lease duration, measured from its own observation',
  async (t) => {
    const { mk, read } = await setup();
    const a = mk('a');
    const b = mk('b');
    try {
      await leaderAndContender(a, b);
      await a.stop();
      const exit = a.intervals.at(-1)!.end!;
      const lastRenew = Date.parse((await read()).spec!.renewTime!);
      await waitFor('b leading', () => b.leading, { timeoutMs: 15_000 });
      const start = b.intervals[0]!.start;
      // b saw the last renew at one of its tries after lastRenew: never earlier than duration after that.
      t.ok(start >= lastRenew + T.leaseDurationMs, `took over ${start - lastRenew} ms after the last renew`);
      t.ok(start - exit <= T.leaseDurationMs + 2 * maxRetry + 1_000, `leaderless ${start - exit} ms`);
      const l = await read();
      t.equal(l.spec?.holderIdentity, 'b');
      t.equal(l.spec?.leaseTransitions, 1, 'a takeover counts a transition');
      t.strictSame(splitBrain([...a.intervals, ...b.intervals], Date.now()), []);
    } finally {
      await b.stop();
    }
  },
);

t.test('a write naming a candidate makes it lead at its next try, as a renew', async (t) => {
  const { mk, read, path } = await setup();
  const b = mk('b');
  try {
    const now = microTime(Date.now());
    await client.create(path.replace(/\/l$/, ''), {
      metadata: { name: 'l' },
      spec: {
        holderIdentity: 'gone',
        leaseDurationSeconds: 3,
        acquireTime: now,
        renewTime: now,
        leaseTransitions: 0,
      },
    });
    b.start();
    await waitFor('b tried', () => b.attempts >= 2, { timeoutMs: 5_000 });
    const cur = await read();
    const at = Date.now();
    const handed = microTime(at);
    await client.replace(path, {
      ...cur,
      spec: { ...cur.spec, holderIdentity: 'b', acquireTime: handed, renewTime: handed, leaseTransitions: 1 },
    });
    await waitFor('b leading', () => b.leading, { timeoutMs: 5_000 });
    t.ok(b.intervals[0]!.start - at <= maxRetry + 500, `${b.intervals[0]!.start - at} ms`);
    const l = await read();
    t.equal(l.spec?.acquireTime, handed, 'a renew keeps acquireTime');
    t.equal(l.spec?.leaseTransitions, 1, 'and the transitions count');
  } finally {
    await b.stop();
  }
});

t.test('a displaced leader keeps working until its renew deadline passes', async (t) => {
  const { mk, read, path } = await setup();
  const a = mk('a');
  try {
    a.start();
    await waitFor('a leading', () => a.leading, { timeoutMs: 5_000 });
    const cur = await read();
    const at = Date.now();
    await client.replace(path, { ...cur, spec: { ...cur.spec, holderIdentity: 'intruder' } });
    await waitFor('a stops', () => !a.leading, { timeoutMs: 10_000 });
    const end = a.intervals[0]!.end!;
    t.equal(a.intervals[0]!.endedBy, 'lost');
    t.ok(end - at >= T.renewDeadlineMs - T.retryPeriodMs, `stopped ${end - at} ms after being displaced`);
    t.ok(end - at <= T.renewDeadlineMs + 2 * T.retryPeriodMs + 1_000, `stopped ${end - at} ms after`);
  } finally {
    await a.stop();
  }
});

t.test(
  'ReleaseOnCancel: a stopping leader releases (empty holder, 1 s) and the other acquires at once',
  async (t) => {
    const { mk, read } = await setup(true);
    const a = mk('a');
    const b = mk('b');
    try {
      await leaderAndContender(a, b);
      await a.stop();
      const released = await read();
      t.ok(released.spec?.holderIdentity === '' || released.spec?.holderIdentity === 'b');
      await waitFor('b leading', () => b.leading, { timeoutMs: 5_000 });
      t.ok(b.intervals[0]!.start - a.intervals[0]!.end! <= maxRetry + 500);
    } finally {
      await b.stop();
    }
  },
);
