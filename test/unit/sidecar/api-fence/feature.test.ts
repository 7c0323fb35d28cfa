// The stale API server's fence as a feature of its own: switched on with the L2 handover (not when
// the handover does not run), its fence read back at start and named in /prestop, stopped with
// its loop. Driven with fakes; its edge against a real API server and nft: test/e2e/l2/stale-api.test.ts.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { SPEAKER_ENV as ENV, fakeContext, ManualClock } from '../../../../lab/fake/feature-context.ts';
import { waitFor } from '../../../../shared/clock.ts';
import type { KubeClient } from '../../../../shared/kube/client.ts';
import { renderApiUnfence } from '../../../../shared/net/fence-tables.ts';
import { API_FENCE_FEATURE, createFeature } from '../../../../sidecar/api-fence/feature.ts';
import { COMPANION_MODULES } from '../../../../sidecar/features.ts';
import type { ToolRunner } from '../../../../sidecar/runner.ts';

const read = (name: string) => readFileSync(new URL(`../../../golden/l2/${name}`, import.meta.url), 'utf8');
const T = { timeoutMs: 5_000, intervalMs: 5 };

/** nft answering as a node with the API fence a previous container left (or none); it can be lifted. */
function fakeRunner(left: boolean) {
  let fenced = left;
  const calls: string[] = [];
  const ok = (stdout: string) => ({ stdout, stderr: '', code: 0 });
  const runner = {
    observeOnly: false,
    run: async (cmd: string, args: string[], opts?: { input?: string }) => {
      const line = `${cmd} ${args.join(' ')}`;
      calls.push(line);
      if (line === 'nft -j list tables')
        return ok(read(fenced ? 'list-tables-api.json' : 'list-tables.json'));
      if (line === 'nft -j list table inet drainguard-api') return ok(read('list-api-fence.json'));
      if (line === 'nft -f -' && opts?.input === renderApiUnfence()) {
        fenced = false;
        return ok('');
      }
      if (cmd === 'ip') return ok('[]');
      throw new Error(`unexpected: ${line}`);
    },
  };
  return { runner: runner as unknown as ToolRunner, calls };
}

const client = {
  get: async () => ({ items: [] }),
} as unknown as KubeClient;

t.test('switched on with the L2 handover; not when the handover does not run', async (t) => {
  const load = COMPANION_MODULES['l2-handover'];
  const on = (await load?.({})) ?? [];
  t.strictSame(
    on.map((c) => c.name),
    [API_FENCE_FEATURE],
  );
  t.equal(on[0]?.createFeature, createFeature);
  t.strictSame(await load?.({ speakerIgnoresExcludeLb: true }), [], 'with --ignore-exclude-lb: none');
  t.strictSame(
    await load?.({ l2Interfaces: ['bad name!'] }),
    [],
    'with an interface name the fence refuses: none',
  );
  t.equal(COMPANION_MODULES['lease-handover'], undefined);
  t.equal(COMPANION_MODULES['netfilter-cleanup'], undefined);
});

t.test('a fence a previous container left while the node drains: kept, named in /prestop', async (t) => {
  const { runner, calls } = fakeRunner(true);
  const { ctx, drain, metrics } = fakeContext({ env: ENV, client, clock: new ManualClock(0), runner });
  drain.set({ terminating: true });
  const feature = createFeature(ctx);
  t.equal(feature.name, 'api-fence');
  await feature.start();
  t.strictSame(await feature.prestop(), { fenced: ['[2001:db8::11]:6443', '192.0.2.11:6443'] });
  t.match(metrics.render(), /drainguard_stale_api_server_fenced 1/);
  await waitFor('a pass of its loop', () => calls.includes('ip -j addr show'), T);
  await feature.stop();
  t.notOk(
    calls.some((c) => c.startsWith('nft -f')),
    'kept: a fence stays until the drain ends',
  );
});

t.test('a fence left on a node that does not drain: lifted at once, with an Event', async (t) => {
  const { runner, calls } = fakeRunner(true);
  const { ctx, events, metrics } = fakeContext({ env: ENV, client, clock: new ManualClock(0), runner });
  const feature = createFeature(ctx);
  await feature.start();
  await waitFor('lifted', async () => ((await feature.prestop()).fenced as string[]).length === 0, T);
  t.ok(calls.includes('nft -f -'));
  t.match(metrics.render(), /drainguard_stale_api_server_fenced 0/);
  await waitFor('the Event', () => events.length > 0, T);
  t.match(events, [{ kind: 'Node', type: 'Normal', reason: 'StaleApiServerUnfenced' }]);
  await feature.stop();
});

t.test('no fence left: /prestop says none', async (t) => {
  const { runner } = fakeRunner(false);
  const { ctx, metrics } = fakeContext({ env: ENV, client, clock: new ManualClock(0), runner });
  const feature = createFeature(ctx);
  await feature.start();
  t.strictSame(await feature.prestop(), { fenced: [] });
  t.match(metrics.render(), /drainguard_stale_api_server_fenced 0/);
  await feature.stop();
});
