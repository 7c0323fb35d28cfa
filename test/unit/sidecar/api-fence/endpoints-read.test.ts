// The guard's read of the `kubernetes` EndpointSlices (which API servers run on this node): a
// first read that fails (the API slow at the sidecar's start) is tried again every 10 s until one
// succeeds; after that, every 10 min. Driven with a clock that moves as the loop sleeps.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { SPEAKER_ENV as ENV, fakeContext } from '../../../../lab/fake/feature-context.ts';
import { type Clock, waitFor } from '../../../../shared/clock.ts';
import type { KubeClient } from '../../../../shared/kube/client.ts';
import { StaleApiGuard } from '../../../../sidecar/api-fence/guard.ts';
import type { ToolRunner } from '../../../../sidecar/runner.ts';

const read = (name: string) => readFileSync(new URL(`../../../golden/l2/${name}`, import.meta.url), 'utf8');
const T = { timeoutMs: 5_000, intervalMs: 1 };
const SLICE = {
  metadata: { name: 'kubernetes', labels: { 'kubernetes.io/service-name': 'kubernetes' } },
  addressType: 'IPv4',
  endpoints: [{ addresses: ['192.0.2.11'] }, { addresses: ['192.0.2.12'] }],
  ports: [{ name: 'https', port: 6443, protocol: 'TCP' }],
};

/** nft shows no fence on this node. */
const runner = {
  observeOnly: false,
  run: async (cmd: string, args: string[]) => {
    if (`${cmd} ${args.join(' ')}` === 'nft -j list tables')
      return { stdout: read('list-tables.json'), stderr: '', code: 0 };
    throw new Error(`unexpected: ${cmd} ${args.join(' ')}`);
  },
} as unknown as ToolRunner;

/** An API whose first `failing` reads of the EndpointSlices fail; each read's clock time kept. */
function endpointsApi(failing: number, clock: { now(): number }) {
  const readAt: number[] = [];
  const client = {
    get: async (path: string) => {
      if (!path.includes('/endpointslices?')) throw new Error(`unexpected: GET ${path}`);
      readAt.push(clock.now());
      if (readAt.length <= failing) throw new Error('GET endpointslices: timed out after 3000 ms');
      return { items: [SLICE] };
    },
  } as unknown as KubeClient;
  return { client, readAt };
}

/**
 * Time moves by what the loop sleeps; each sleep yields to the event loop first (the test's own
 * waits run between the loop's passes).
 */
function yieldingClock(): Clock {
  let t = 0;
  return {
    now: () => t,
    sleep: async (ms: number) => {
      await new Promise((resolve) => setImmediate(resolve));
      t += ms;
    },
  };
}

function guardWith(failing: number) {
  const clock = yieldingClock();
  const { client, readAt } = endpointsApi(failing, clock);
  const { ctx } = fakeContext({ env: ENV, client, clock, runner });
  const guard = new StaleApiGuard(ctx, {
    ownAddresses: async () => ['192.0.2.11'],
    localEtcd: async () => 'unknown',
  });
  return { guard, clock, readAt };
}

t.test('a first read that fails is tried again within 10 s, until one succeeds', async (t) => {
  const { guard, clock, readAt } = guardWith(2);
  await guard.start();
  await waitFor('the API server on this node known', () => guard.localEndpoints.length > 0, T);
  t.strictSame(guard.localEndpoints, [{ address: '192.0.2.11', port: 6443 }]);
  t.equal(readAt.length, 3, 'two failed reads, then the one that succeeded');
  const gaps = readAt.slice(1).map((at, i) => at - (readAt[i] as number));
  t.ok(
    gaps.every((g) => g > 9_000 && g <= 10_500),
    `tried again every 10 s of the clock (gaps ${gaps.join(', ')} ms)`,
  );
  // Once known, read again only every 10 min.
  const known = clock.now();
  await waitFor('9 min more of the loop', () => clock.now() - known > 9 * 60_000, T);
  t.equal(readAt.length, 3, 'no read in the 9 min after one succeeded');
  await waitFor('the 10 min read', () => readAt.length === 4, T);
  t.ok((readAt[3] as number) - (readAt[2] as number) > 10 * 60_000);
  await guard.stop();
});

t.test('a first read that succeeds: the next one 10 min later', async (t) => {
  const { guard, clock, readAt } = guardWith(0);
  await guard.start();
  await waitFor('the API server on this node known', () => guard.localEndpoints.length > 0, T);
  await waitFor('11 min of the loop', () => clock.now() > 11 * 60_000, T);
  t.equal(readAt.length, 2, `reads at ${readAt.join(', ')} ms`);
  t.ok((readAt[1] as number) > 10 * 60_000);
  await guard.stop();
});
