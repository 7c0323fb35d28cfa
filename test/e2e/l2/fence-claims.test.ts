// The fence's claims on a real kernel (issue 42, items 3 and 4), through the sidecar's own NodeHost
// and real nft in network namespaces: the node's eth0 and another host across it (peer0).
// - A claim the kernel makes while the sidecar re-renders the fence (after its read of the tables,
//   before its `nft -f`) survives the re-render: the claimed sets are never deleted.
// - The node's own unsolicited NA, looped back to its input by multicast loopback (on, as MetalLB
//   leaves it), never claims its own held VIP, even without the own-MAC guard (`ip -j link`
//   unreadable); another host's NA still does.
import t from 'tap';
import { waitFor } from '../../../shared/clock.ts';
import { createLogger } from '../../../shared/log.ts';
import { type FenceSpec, ipv6ToHex } from '../../../sidecar/l2/fence.ts';
import { NodeHost } from '../../../sidecar/l2/host.ts';
import { type RunOptions, ToolRunner } from '../../../sidecar/runner.ts';
import { arpFrom, framesSeen, type Host, linkedHosts, NA_FILTER, WIRE } from './fence-wire.ts';

const VIP6 = '2001:db8::10';
/** The claim watch of a handover (or a fail-safe's held VIPs): answered until another node claims them. */
const watch: FenceSpec = {
  vips4: [],
  vips6: [],
  interfaces: ['eth0'],
  memberlistPorts: [],
  held: ['192.0.2.10', '192.0.2.11', VIP6],
};

let node: Host;
let far: Host;
t.before(async () => {
  ({ node, far } = await linkedHosts('claims'));
});
t.teardown(async () => {
  await node?.destroy();
  await far?.destroy();
});

/**
 * The sidecar's host in the node's namespace. `beforeApply` runs once, just before the next
 * `nft -f` (after the host has read the installed tables); `linksFail` fails `ip -j link`.
 */
function nodeHost(opts: { linksFail?: boolean } = {}) {
  const runner = new ToolRunner({
    log: createLogger('test', 'silent'),
    prefix: ['ip', 'netns', 'exec', node.ns],
  });
  const hooks: { beforeApply?: () => Promise<void> } = {};
  const ran: string[] = [];
  const run = async (tool: string, args: string[], o?: RunOptions) => {
    const line = `${tool} ${args.join(' ')}`;
    ran.push(line);
    if (opts.linksFail && line === 'ip -j link show') throw new Error('ip: cannot open netlink socket');
    if (line === 'nft -f -' && hooks.beforeApply) {
      const before = hooks.beforeApply;
      hooks.beforeApply = undefined;
      await before();
    }
    return runner.run(tool, args, o);
  };
  const host = new NodeHost({ run } as unknown as ToolRunner, createLogger('test', 'silent'));
  return { host, hooks, ran };
}

const sendFrom = (h: Host, dev: string) => ({
  garp: (vip: string) => h.run(['python3', WIRE, 'send-garp', dev, vip]),
  na: (target: string) => h.run(['python3', WIRE, 'send-na', dev, target]),
});
const own = () => sendFrom(node, 'eth0');
const other = () => sendFrom(far, 'peer0');
const seen = (filter: string, send: () => Promise<unknown>) =>
  framesSeen({ ns: far, iface: 'peer0' }, { ns: node, iface: 'eth0' }, filter, send);
const claimedNow = async () => {
  const sets = await Promise.all([
    node.exec(['nft', '-j', 'list', 'set', 'netdev', 'drainguard', 'claimed4']),
    node.exec(['nft', '-j', 'list', 'set', 'inet', 'drainguard', 'claimed6']),
  ]);
  return sets.map((r) => (r.code === 0 ? r.stdout : '')).join('\n');
};

t.test(
  'item 3: a claim the kernel makes between the re-render read and its nft -f survives the re-render',
  async (t) => {
    const { host, hooks } = nodeHost();
    await host.applyFence(watch);
    t.strictSame((await host.readFence())?.claimed, undefined, 'nothing claimed yet');
    // The watch follows a service announced here late: re-rendered with one more VIP held. Another
    // node's takeover arrives after the host read the installed tables, before it applies.
    hooks.beforeApply = async () => {
      await other().garp('192.0.2.10');
      await other().na(VIP6);
      await waitFor(
        'the kernel claimed both',
        async () => {
          const text = await claimedNow();
          return text.includes('192.0.2.10') && text.includes(ipv6ToHex(VIP6));
        },
        { timeoutMs: 5_000, intervalMs: 20 },
      );
    };
    const after = await host.applyFence({ ...watch, held: [...(watch.held ?? []), '192.0.2.12'] });
    t.equal(hooks.beforeApply, undefined, 'the claims arrived inside the window');
    t.strictSame(after?.held, ['192.0.2.10', '192.0.2.11', '192.0.2.12', VIP6], 'the new fence is on');
    // Before: the table was deleted and added again with the claims read before: none.
    t.strictSame(after?.claimed, ['192.0.2.10', VIP6], 'the claims survived the re-render');
    t.equal(await seen(arpFrom('192.0.2.10'), () => own().garp('192.0.2.10')), 0, 'claimed: dropped');
    t.equal(await seen(NA_FILTER, () => own().na(VIP6)), 0, 'claimed VIPv6: dropped');
    t.ok((await seen(arpFrom('192.0.2.12'), () => own().garp('192.0.2.12'))) >= 2, 'the new VIP held');
    await host.applyFence(undefined);
  },
);

t.test(
  "item 4: the node's own unsolicited NA looped back (multicast loopback on) never claims its own held VIP, without the own-MAC guard; another host's does",
  async (t) => {
    // `ip -j link` unreadable: the fence has no ownmacs set, the guard that alone saved it before.
    const { host, ran } = nodeHost({ linksFail: true });
    await host.applyFence(watch);
    t.ok(ran.includes('ip -j link show'), 'the links were asked for');
    t.notMatch(await node.run(['nft', 'list', 'table', 'inet', 'drainguard']), /ownmacs/, 'no own-MAC guard');
    // Counts what reaches the node's own input: proof the own NA came back before claims are read.
    await node.run(['nft', '-f', '-'], {
      input: `table inet looped {
  chain input {
    type filter hook input priority -10; policy accept;
    icmpv6 type nd-neighbor-advert @th,64,128 ${ipv6ToHex(VIP6)} counter
  }
}
`,
    });
    t.teardown(() => node.exec(['nft', 'delete', 'table', 'inet', 'looped']));
    const looped = async () =>
      Number(
        /counter packets (\d+)/.exec(await node.run(['nft', 'list', 'table', 'inet', 'looped']))?.[1] ?? 0,
      );
    await own().na(VIP6);
    await waitFor('the own NA looped back to input', async () => (await looped()) >= 1, {
      timeoutMs: 5_000,
      intervalMs: 20,
    });
    // Before: claimed by this very NA (the input rule's only guard was the own MACs).
    t.notMatch(await claimedNow(), ipv6ToHex(VIP6).slice(2), 'not claimed by its own NA');
    t.ok((await seen(NA_FILTER, () => own().na(VIP6))) >= 2, 'still answered');
    // Another node's takeover: claimed, and the kernel drops this node's NAs for it at once.
    await other().na(VIP6);
    await waitFor('claimed by the other host', async () => (await claimedNow()).includes(ipv6ToHex(VIP6)), {
      timeoutMs: 5_000,
      intervalMs: 20,
    });
    t.equal(await seen(NA_FILTER, () => own().na(VIP6)), 0, 'claimed: dropped');
    await host.applyFence(undefined);
  },
);
