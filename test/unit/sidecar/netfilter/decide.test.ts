import t from 'tap';
import { ConfirmationTracker } from '../../../../sidecar/netfilter/confirm.ts';
import { decide, type PodInfo, type Snapshot } from '../../../../sidecar/netfilter/decide.ts';
import { parseListing } from '../../../../sidecar/netfilter/ebtables.ts';
import {
  parseAddrs,
  parseFdb,
  parseNeighbours,
  parseRoutes,
} from '../../../../sidecar/netfilter/hoststate.ts';
import {
  ebtablesDeleteArgs,
  ebtablesRestoreInput,
  neighbourBatchInput,
} from '../../../../sidecar/netfilter/plan.ts';
import { nodeAddresses, parsePodList, podInfos } from '../../../../sidecar/netfilter/pods.ts';
import { azureNodeFile as golden } from './azure-node.ts';

const expected = JSON.parse(golden('expected.json')) as {
  staleSpecs: string[];
  keptSpecs: { chain: string; spec: string }[];
  staleNeighbours: string[];
  keptNeighbours: string[];
};
const pods = JSON.parse(golden('pods.json')) as PodInfo[];

function snapshot(listing: string): Snapshot {
  return {
    rules: parseListing(golden(listing)).rules,
    neighbours: parseNeighbours(golden('neigh.json')),
    ifaces: parseAddrs(golden('addr.json')),
    routes: [...parseRoutes(golden('route4.json'), 4), ...parseRoutes(golden('route6.json'), 6)],
    fdb: parseFdb(golden('fdb.json')),
  };
}

const pad = (spec: string) =>
  spec.replace(/\b[0-9a-f]{1,2}(:[0-9a-f]{1,2}){5}\b/g, (m) =>
    m
      .split(':')
      .map((b) => b.padStart(2, '0'))
      .join(':'),
  );

t.test('staleness decision on the recorded azure-vnet layout', async (t) => {
  for (const listing of ['nat-nft.txt', 'nat-legacy.txt']) {
    t.test(`${listing}: exactly the stale rules and neighbours, nothing protected`, async (t) => {
      const d = decide({ snapshot: snapshot(listing), pods, nodeAddresses: ['192.0.2.10'] });
      t.strictSame(d.staleRules.map((r) => pad(r.rule.spec)).sort(), [...expected.staleSpecs].sort());
      t.strictSame(d.staleNeighbours.map((n) => n.key).sort(), [...expected.staleNeighbours].sort());
      const kept = d.verdicts
        .filter((v) => v.verdict !== 'stale')
        .map((v) => `${v.rule.chain} ${pad(v.rule.spec)}`);
      for (const k of expected.keptSpecs) t.ok(kept.includes(`${k.chain} ${k.spec}`), `kept: ${k.spec}`);
      for (const n of expected.keptNeighbours) t.ok(!d.staleNeighbours.some((s) => s.key === n), n);
    });
  }

  t.test('says why: pod owner, gone pods, and the MAC', async (t) => {
    const d = decide({ snapshot: snapshot('nat-nft.txt'), pods, nodeAddresses: [] });
    const reasons = d.staleRules.map((r) => r.reason);
    t.ok(
      reasons.includes(
        'arpreply for 198.51.100.13 (pod kube-system/lxc-health) points at MAC 02:aa:00:00:00:13, not known here',
      ),
      reasons.join('\n'),
    );
    t.ok(reasons.some((r) => r.startsWith('dnat for 2001:db8:1::12 (no current pod on this node)')));
    const n = d.staleNeighbours.find((x) => x.key === '198.51.100.17|azure0');
    t.match(n!.reason, /FAILED neighbour for 198.51.100.17 .* on azure0, but its route is via lxc13/);
  });

  t.test('tunnel mode: one shared MAC, decided per IP', async (t) => {
    const d = decide({ snapshot: snapshot('nat-nft.txt'), pods, nodeAddresses: [] });
    const byIp = (ip: string) => d.verdicts.filter((v) => v.rule.perPod?.ip === ip).map((v) => v.verdict);
    t.strictSame(byIp('198.51.100.16'), ['live', 'live']);
    t.strictSame(byIp('198.51.100.14'), ['stale', 'stale']);
    t.strictSame(byIp('198.51.100.15'), ['stale', 'stale']);
  });

  t.test('node addresses from the Node object protect rules even without a local interface', async (t) => {
    const s = snapshot('nat-nft.txt');
    const d = decide({ snapshot: s, pods, nodeAddresses: ['198.51.100.12'] });
    t.ok(!d.staleRules.some((r) => r.rule.perPod?.ip === '198.51.100.12'));
    t.ok(d.verdicts.some((v) => v.verdict === 'protected' && v.reason === '198.51.100.12 is a node address'));
  });

  t.test('a MAC learned in the bridge FDB on a local port is known', async (t) => {
    const s = snapshot('nat-nft.txt');
    s.ifaces.push({ name: 'veth9', ips: [], kind: 'veth' });
    s.fdb.push({ mac: '02aa00000012', dev: 'veth9', master: 'azure0', state: '', flags: [] });
    const d = decide({ snapshot: s, pods, nodeAddresses: [] });
    t.ok(!d.staleRules.some((r) => r.rule.perPod?.ip === '198.51.100.12'));
    t.ok(
      d.verdicts.some(
        (v) => v.reason === 'MAC 02:aa:00:00:00:12 is known here (bridge FDB on veth9 (azure0))',
      ),
    );
  });

  t.test(
    'a MAC learned on the uplink is not "here" (tunnel mode: the gateway MAC is learned on eth0)',
    async (t) => {
      const s = snapshot('nat-nft.txt');
      // eth0 is a veth in the test layout, but the nat rules name it (-i eth0 / -o eth0): uplink.
      s.ifaces.push({ name: 'ens5', ips: [] }); // a physical NIC: no link kind
      s.fdb.push(
        { mac: '123456789abc', dev: 'eth0', master: 'azure0', state: '', flags: [] },
        { mac: '02aa00000012', dev: 'ens5', master: 'azure0', state: '', flags: [] },
      );
      const d = decide({ snapshot: s, pods, nodeAddresses: [] });
      const stale = new Set(d.staleRules.map((r) => r.rule.perPod?.ip));
      t.ok(stale.has('198.51.100.14') && stale.has('198.51.100.15'), 'tunnel-mode rules still stale');
      t.ok(stale.has('198.51.100.12'), 'a MAC learned on a physical port is not known here');
    },
  );

  t.test('no ebtables (unusable flavour): neighbours are still judged', async (t) => {
    const s = snapshot('nat-nft.txt');
    delete s.rules;
    const d = decide({ snapshot: s, pods, nodeAddresses: [] });
    t.equal(d.staleRules.length, 0);
    t.equal(d.staleNeighbours.length, expected.staleNeighbours.length);
  });
});

t.test('two-pass confirmation', async (t) => {
  t.test('confirms only on a later pass at least confirmMs after the first sighting', async (t) => {
    const tracker = new ConfirmationTracker(2000);
    t.strictSame([...tracker.observe(0, ['a', 'b'])], []);
    t.strictSame([...tracker.observe(500, ['a', 'b'])], [], 'event-triggered pass too soon');
    t.strictSame([...tracker.observe(2000, ['a'])], ['a']);
    t.strictSame([...tracker.observe(2100, ['a', 'b'])], ['a'], 'b broke its run at 2000 and starts again');
    t.strictSame(tracker.pending(), [
      { key: 'a', confirmableAt: 2000 },
      { key: 'b', confirmableAt: 4100 },
    ]);
    tracker.forget(['a']);
    t.strictSame(
      [...tracker.observe(5000, ['a', 'b'])],
      ['b'],
      'a deleted and re-added: needs two sightings again',
    );
  });

  t.test('rejects a negative interval', async (t) => {
    t.throws(() => new ConfirmationTracker(-1), /confirmMs must be >= 0/);
  });
});

t.test('batch plans', async (t) => {
  t.test('one ebtables-restore batch with one -D per occurrence, and one ip batch', async (t) => {
    const d = decide({ snapshot: snapshot('nat-legacy.txt'), pods, nodeAddresses: [] });
    const text = ebtablesRestoreInput(d.staleRules);
    const lines = text.trim().split('\n');
    t.equal(lines[0], '*nat');
    t.equal(lines.at(-1), 'COMMIT');
    t.equal(lines.length, expected.staleSpecs.length + 2);
    t.ok(
      lines.includes(
        '-D PREROUTING -p ARP --arp-op Request --arp-ip-dst 198.51.100.12 -j arpreply --arpreply-mac 2:aa:0:0:0:12',
      ),
    );
    t.strictSame(ebtablesDeleteArgs(d.staleRules[0]!).slice(0, 4), ['-t', 'nat', '-D', 'PREROUTING']);
    t.equal(
      neighbourBatchInput(d.staleNeighbours.filter((n) => n.key === '198.51.100.17|azure0')),
      'neigh del 198.51.100.17 dev azure0\n',
    );
  });

  t.test('refuses specs that could break out of a batch line', async (t) => {
    const d = decide({ snapshot: snapshot('nat-nft.txt'), pods, nodeAddresses: [] });
    const bad = { ...d.staleRules[0]!, rule: { ...d.staleRules[0]!.rule, spec: '-j ACCEPT\n-F' } };
    t.throws(() => ebtablesRestoreInput([bad]), /refusing/);
  });
});

t.test('pods and node addresses', async (t) => {
  t.test('keeps pods of this node with their own IPs', async (t) => {
    const list = parsePodList(
      JSON.stringify({
        kind: 'PodList',
        items: [
          {
            metadata: { name: 'a', namespace: 'x' },
            spec: { nodeName: 'n1' },
            status: {
              phase: 'Running',
              podIP: '198.51.100.1',
              podIPs: [{ ip: '198.51.100.1' }, { ip: '2001:db8:1::1' }],
            },
          },
          {
            metadata: { name: 'b', namespace: 'x' },
            spec: { nodeName: 'n2' },
            status: { podIP: '198.51.100.2' },
          },
          {
            metadata: { name: 'h', namespace: 'x' },
            spec: { nodeName: 'n1', hostNetwork: true },
            status: { podIP: '192.0.2.1' },
          },
          {
            metadata: { name: 'done', namespace: 'x' },
            spec: { nodeName: 'n1' },
            status: { phase: 'Succeeded', podIP: '198.51.100.3' },
          },
          {
            metadata: { name: 'pending', namespace: 'x' },
            spec: { nodeName: 'n1' },
            status: { phase: 'Pending' },
          },
        ],
      }),
      'pods.json',
    );
    t.strictSame(podInfos(list, 'n1'), [
      { namespace: 'x', name: 'a', ips: ['198.51.100.1', '2001:db8:1::1'] },
    ]);
    t.throws(() => parsePodList('{}', 'f.json'), /f.json: expected a PodList/);
    t.throws(() => parsePodList('nope', 'f.json'), /f.json: not JSON/);
    t.strictSame(
      nodeAddresses({
        status: {
          addresses: [
            { type: 'InternalIP', address: '192.0.2.1' },
            { type: 'Hostname', address: 'n1' },
            { type: 'ExternalIP', address: '203.0.113.1' },
          ],
        },
      }),
      ['192.0.2.1', '203.0.113.1'],
    );
  });
});
