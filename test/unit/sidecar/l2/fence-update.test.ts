// A re-render that keeps the claimed sets (fence-update.ts): what it reads back from nft, the
// transaction's first lines, and the whole replace it falls back to when nft refuses to keep them.
// On real nft: test/e2e/l2/fence-claims.test.ts.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { createLogger } from '../../../../shared/log.ts';
import { renderFence } from '../../../../sidecar/l2/fence.ts';
import { clearLines, installedFence } from '../../../../sidecar/l2/fence-update.ts';
import { NodeHost } from '../../../../sidecar/l2/host.ts';
import type { ToolRunner } from '../../../../sidecar/runner.ts';

const read = (name: string) => readFileSync(new URL(`../../../golden/l2/${name}`, import.meta.url), 'utf8');
const held = {
  vips4: [],
  vips6: [],
  interfaces: ['eth0'],
  memberlistPorts: [7946],
  pools: ['192.0.2.100-192.0.2.120', '2001:db8::100-2001:db8::1ff'],
  held: ['192.0.2.10', '192.0.2.11', '2001:db8::10'],
};

t.test('the installed chains and sets, by family (real nft 1.0.6 output)', async (t) => {
  t.strictSame(installedFence([read('list-netdev-held.json'), read('list-inet-held.json')]), {
    netdev: { chains: ['claims-eth0', 'egress-eth0'], sets: ['held4', 'claimed4', 'vip4', 'pool4'] },
    inet: { chains: ['claims', 'output', 'memberlist'], sets: ['held6', 'claimed6', 'pool6', 'memberlist'] },
  });
  t.strictSame(installedFence([]), {});
  const odd = JSON.stringify({
    nftables: [{ set: { family: 'inet', table: 'drainguard', name: 'x; flush ruleset' } }],
  });
  t.throws(() => installedFence([odd]), /unexpected nft name/, 'never spliced into a script');
});

t.test('nothing to keep: each table replaced whole, as before', async (t) => {
  t.strictSame(clearLines({}), [
    'table netdev drainguard {}',
    'delete table netdev drainguard',
    'table inet drainguard {}',
    'delete table inet drainguard',
  ]);
  const installed = installedFence([read('list-netdev-held.json'), read('list-inet-held.json')]);
  // No VIP held any more (dropped outright once confirmed): the claims matter no more.
  const text = renderFence({ ...held, held: [], vips4: ['192.0.2.10'] }, installed);
  t.match(
    text,
    /^table netdev drainguard \{\}\ndelete table netdev drainguard\ntable inet drainguard \{\}\ndelete table inet drainguard\n/,
  );
  // IPv4 held, IPv6 not: only the netdev table keeps its claims.
  t.match(
    renderFence({ ...held, held: ['192.0.2.10'] }, installed),
    /^table netdev drainguard \{\}\nflush table netdev drainguard\n(delete (chain|set) netdev drainguard [a-z0-9-]+\n)+table inet drainguard \{\}\ndelete table inet drainguard\n/,
  );
});

t.test(
  'nft refuses to keep a claimed set (declared otherwise): the fence is replaced whole with the claims read, not left unchanged',
  async (t) => {
    const outputs: Record<string, string> = {
      'nft -j list tables': read('list-tables.json'),
      'nft -j list table netdev drainguard': read('list-netdev-held.json'),
      'nft -j list table inet drainguard': read('list-inet-held.json'),
      'ip -j link show': JSON.stringify([{ ifname: 'eth0', address: '02:00:00:00:00:0a' }]),
    };
    const inputs: string[] = [];
    const runner = {
      async run(tool: string, args: string[], opts: { input?: string } = {}) {
        const line = `${tool} ${args.join(' ')}`;
        if (line === 'nft -f -') {
          inputs.push(opts.input ?? '');
          if (inputs.length === 1) throw new Error('nft: Error: Could not process rule: File exists');
          return { stdout: '', stderr: '', skipped: false };
        }
        if (!(line in outputs)) throw new Error(`unexpected: ${line}`);
        return { stdout: outputs[line], stderr: '', skipped: false };
      },
    } as unknown as ToolRunner;
    const host = new NodeHost(runner, createLogger('test', 'silent'));
    await host.applyFence(held);
    t.equal(inputs.length, 2);
    t.match(inputs[0], /flush table netdev drainguard/);
    t.match(inputs[1], /^table netdev drainguard \{\}\ndelete table netdev drainguard\n/);
    t.match(inputs[1], /set claimed4 \{ type ipv4_addr; flags dynamic; elements = \{ 192\.0\.2\.10 \}; \}/);
  },
);
