import t from 'tap';
import { FakeDrain, fakeContext } from '../../../../lab/fake/feature-context.ts';
import { systemClock, waitFor } from '../../../../shared/clock.ts';
import type { KubeClient } from '../../../../shared/kube/client.ts';
import type { Node } from '../../../../shared/kube/types.ts';
import { createFeature } from '../../../../sidecar/netfilter/feature.ts';
import { FakeHost } from './fakehost.ts';

const NODE: Node = {
  metadata: { name: 'n1' },
  status: { addresses: [{ type: 'InternalIP', address: '192.0.2.10' }] },
};

/** Just enough of KubeClient for an Informer and a Node read; `gets` lists every GET's path. */
function stubClient(pods: unknown[], node: Node = NODE) {
  const gets: string[] = [];
  const client = {
    get: async (path: string) => {
      gets.push(path);
      return path === '/api/v1/pods' ? { metadata: { resourceVersion: '1' }, items: pods } : node;
    },
    watch: (_p: string, _q: unknown, _cb: unknown, signal: AbortSignal) =>
      new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true })),
  } as unknown as KubeClient;
  return { client, gets };
}

/** A host on 192.0.2.10 routing 198.51.100.0/24 to azure0, with one arpreply rule for `ip`. */
function hostWithArpReply(ip: string, mac: string): FakeHost {
  const h = new FakeHost();
  h.addrs = [{ ifname: 'azure0', address: '02:00:00:00:00:fe', addr_info: [{ local: '192.0.2.10' }] }];
  h.routes4 = [{ dst: '198.51.100.0/24', dev: 'azure0' }];
  h.rules = [
    {
      chain: 'PREROUTING',
      spec: `-p ARP --arp-op Request --arp-ip-dst ${ip} -j arpreply --arpreply-mac ${mac}`,
    },
  ];
  return h;
}

function start(opts: {
  host: FakeHost;
  client: KubeClient;
  env?: Record<string, string>;
  drain?: FakeDrain;
}) {
  const { ctx, events, metrics } = fakeContext({
    env: {
      DRAINGUARD_PROFILE: 'netfilter-cleanup',
      DRAINGUARD_FEATURES: 'netfilter-cleanup',
      DRAINGUARD_POD_NAME: 'p',
      DRAINGUARD_POD_NAMESPACE: 'x',
      DRAINGUARD_NODE_NAME: 'n1',
      DRAINGUARD_CLEANUP_CONFIRM_SECONDS: '0',
      ...opts.env,
    },
    client: opts.client,
    clock: systemClock,
    runner: opts.host,
    ...(opts.drain ? { drain: opts.drain } : {}),
  });
  const cap = createFeature(ctx) as ReturnType<typeof createFeature> & {
    trigger(r: string): void;
    idle(): Promise<void>;
    passes: number;
  };
  return { cap, events, metrics };
}

t.test('netfilter-cleanup feature (fake host, stub API)', async (t) => {
  t.test('dry-run: reports each stale item once (Event, metrics), deletes nothing', async (t) => {
    const h = hostWithArpReply('198.51.100.12', '02:aa:00:00:00:12');
    const { cap, events, metrics } = start({
      host: h,
      client: stubClient([]).client,
      env: { DRAINGUARD_CLEANUP_DRY_RUN: 'true' },
    });
    await cap.start();
    await waitFor('dry-run report', () => events.length > 0, { timeoutMs: 10_000 });
    for (let i = 0; i < 3; i++) {
      cap.trigger('test');
      await cap.idle();
    }
    await cap.stop();
    t.strictSame(
      events.map((e) => `${e.reason}: ${e.message}`),
      [
        'NetfilterCleanupDryRun: netfilter cleanup would remove 1 stale ebtables rule(s) and 0 neighbour(s): arpreply 198.51.100.12→02:aa:00:00:00:12',
      ],
    );
    t.match(metrics.render(), /drainguard_netfilter_removed_total\{dry_run="true",kind="rule"\} 1\n/);
    t.equal(h.rules.length, 1);
    t.equal(h.deleted.length, 0);
  });

  t.test("the node's own addresses come from the drain watcher's Node: no GET of its own", async (t) => {
    // 198.51.100.7 is no pod's: its rule would be stale were it not the Node's own address.
    const h = hostWithArpReply('198.51.100.7', '02:aa:00:00:00:07');
    const node: Node = {
      metadata: { name: 'n1' },
      status: { addresses: [{ type: 'InternalIP', address: '198.51.100.7' }] },
    };
    const drain = new FakeDrain();
    drain.readNode = () => node;
    const api = stubClient([], node);
    const { cap, events } = start({ host: h, client: api.client, drain });
    await cap.start();
    // Passes are held until the pod list has arrived: ask for one until two have run.
    await waitFor(
      'two passes',
      () => {
        if (cap.passes >= 2) return true;
        cap.trigger('test');
        return false;
      },
      { timeoutMs: 10_000 },
    );
    await cap.stop();
    t.equal(h.deleted.length, 0, "the rule for the Node's own address is kept");
    t.strictSame(events, []);
    t.strictSame(
      api.gets.filter((p) => p.startsWith('/api/v1/nodes')),
      [],
      'no read of the own Node: the drain watcher watches it',
    );
  });
});
