// Stale netfilter state on a real node, cleaned by the standalone DaemonSet as a user applies it.
// node-b is given what azure-vnet leaves behind after a CNI change (lab/cluster/netfilter-scene.ts):
// a real client pod on the same bridge cannot reach the real pod with the reused IP (the stale
// arpreply answers its ARP with a dead MAC) until the cleanup has run; nothing live or protected
// is deleted.
import t from 'tap';
import type { Cluster } from '../../../lab/cluster/cluster.ts';
import { installNetfilterCleanup } from '../../../lab/cluster/install.ts';
import {
  KEPT_NEIGHBOUR,
  type NetfilterScene,
  prepareNetfilterScene,
} from '../../../lab/cluster/netfilter-scene.ts';
import { waitFor } from '../../../shared/clock.ts';
import { withLogs } from './logs.ts';
import { cluster } from './shared.ts';

const NODE = 'node-b';
const T = { timeoutMs: 120_000, intervalMs: 500 };

let c: Cluster;
const k = (args: string[]) => c.k(args);

t.test('netfilter cleanup on a real node (standalone DaemonSet)', { timeout: 900_000 }, async (t) => {
  let scene: NetfilterScene;

  t.before(async () => {
    c = await cluster();
    scene = await prepareNetfilterScene(c, NODE, 'nf-flow');
  });

  t.test(
    'the reused IP is unreachable, then reachable once the DaemonSet has cleaned: nothing live or protected deleted',
    async (t) =>
      withLogs(c, async () => {
        // The client asks for the target's MAC for the first time and gets the dead one.
        t.equal(await scene.reachable(), false, 'the stale arpreply hides the pod with the reused IP');
        await installNetfilterCleanup(c);
        await waitFor('stale rules and the stale neighbour removed on node-b', () => scene.cleaned(), T);
        const rules = await scene.rules();
        for (const s of scene.kept) t.ok(rules.includes(s), `kept: ${s}\n${rules}`);
        const kn = KEPT_NEIGHBOUR;
        t.ok(
          (await scene.neighbours()).includes(`${kn.ip} dev ${kn.dev} lladdr ${kn.mac} PERMANENT`),
          "ip-masq-agent's neighbour kept",
        );
        await waitFor('the client reaches the pod with the reused IP', () => scene.reachable(), T);
        const events = await k([
          'get',
          'events',
          '-n',
          'default',
          '--field-selector',
          `involvedObject.name=${NODE}`,
          '-o',
          'json',
        ]);
        const msgs = (JSON.parse(events) as { items: { reason: string; message: string }[] }).items
          .filter((e) => e.reason === 'NetfilterCleanup')
          .map((e) => e.message);
        t.ok(
          msgs.some((m) => /removed 4 stale ebtables rule\(s\) and 1 neighbour\(s\)/.test(m)),
          `NetfilterCleanup Event on ${NODE}: ${msgs.join(' | ')}`,
        );
        // The other nodes had nothing stale: nothing reported there.
        for (const other of ['node-a', 'node-c']) {
          const ev = await k([
            'get',
            'events',
            '-n',
            'default',
            '--field-selector',
            `involvedObject.name=${other},reason=NetfilterCleanup`,
            '-o',
            'name',
          ]);
          t.equal(ev.trim(), '', `${other}: no cleanup`);
        }
      }),
  );
});
