// The feature's view of the node (host.ts) with a scripted tool runner. Who else could announce
// (candidates.ts): candidates.test.ts.
import t from 'tap';
import { createLogger } from '../../../../shared/log.ts';
import type { FenceSpec } from '../../../../sidecar/l2/fence.ts';
import { NodeHost } from '../../../../sidecar/l2/host.ts';
import type { ToolRunner } from '../../../../sidecar/runner.ts';

const spec: FenceSpec = { vips4: ['192.0.2.10'], vips6: [], interfaces: ['eth0'], memberlistPorts: [] };

/** A runner that answers `ip`/`nft` from a script and records each call. */
function scriptedRunner(answer: (tool: string, args: string[]) => { stdout: string; skipped?: boolean }) {
  const calls: string[] = [];
  const runner = {
    async run(tool: string, args: string[]) {
      calls.push(`${tool} ${args.join(' ')}`);
      const a = answer(tool, args);
      return { stdout: a.stdout, stderr: '', skipped: a.skipped ?? false };
    },
  } as unknown as ToolRunner;
  return { runner, calls };
}

const log = createLogger('test', 'silent');

t.test('host: each VIP route resolved once until forgotten; the links deduplicated', async (t) => {
  const { runner, calls } = scriptedRunner((_tool, args) => {
    if (args.includes('192.0.2.99')) throw new Error('RTNETLINK answers: Network is unreachable');
    const dev = args.includes('default') ? 'eth1' : 'eth0';
    return { stdout: JSON.stringify([{ dst: args.at(-1), dev }]) };
  });
  const host = new NodeHost(runner, log);
  t.strictSame(await host.routeDevices(['192.0.2.10', '192.0.2.11', 'default', '192.0.2.99']), [
    'eth0',
    'eth1',
  ]);
  t.equal(calls.length, 4);
  t.strictSame(await host.routeDevices(['192.0.2.10', '192.0.2.99']), ['eth0'], 'no route: no link');
  t.equal(calls.length, 4, 'resolved once, failures too');
  host.forgetRoutes();
  await host.routeDevices(['192.0.2.10']);
  t.equal(calls.length, 5);
});

t.test('host: a fence is read back after nft applied it; observe-only reads nothing back', async (t) => {
  const applied = scriptedRunner((_tool, args) => ({
    stdout: args.includes('tables') ? '{"nftables":[]}' : '',
  }));
  t.equal(await new NodeHost(applied.runner, log).applyFence(spec), undefined, 'not there when read back');
  t.strictSame(applied.calls, ['nft -f -', 'nft -j list tables']);

  const observeOnly = scriptedRunner(() => ({ stdout: '', skipped: true }));
  const host = new NodeHost(observeOnly.runner, log);
  t.strictSame(await host.applyFence(spec), spec, 'what it would be');
  t.equal(await host.applyFence(undefined), undefined);
  t.strictSame(observeOnly.calls, ['nft -f -', 'nft -f -']);
});
