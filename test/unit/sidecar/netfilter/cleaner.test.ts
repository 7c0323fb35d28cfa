import fc from 'fast-check';
import pino from 'pino';
import t from 'tap';
import { steppingClock } from '../../../../lab/fake/feature-context.ts';
import { Cleaner } from '../../../../sidecar/netfilter/cleaner.ts';
import type { PodInfo } from '../../../../sidecar/netfilter/decide.ts';
import { FakeHost, type FakeRule } from './fakehost.ts';

const log = pino({ level: 'silent' });
const NODE_IP = '192.0.2.10';
const LOCAL_MAC = '02:00:00:00:00:fe';

const arp = (ip: string, mac: string): FakeRule => ({
  chain: 'PREROUTING',
  spec: `-p ARP --arp-op Request --arp-ip-dst ${ip} -j arpreply --arpreply-mac ${mac}`,
});
const dnat = (ip: string, mac: string): FakeRule => ({
  chain: 'PREROUTING',
  spec: `-p IPv4 -i eth0 --ip-dst ${ip} -j dnat --to-dst ${mac} --dnat-target ACCEPT`,
});
const PROTECTED: FakeRule[] = [
  arp(NODE_IP, '02:00:00:00:00:aa'),
  {
    chain: 'PREROUTING',
    spec: '-p ARP -i eth0 --arp-op Reply -j dnat --to-dst ff:ff:ff:ff:ff:ff --dnat-target ACCEPT',
  },
  { chain: 'PREROUTING', spec: '-i az+ -j dnat --to-dst 12:34:56:78:9a:bc --dnat-target ACCEPT' },
  { chain: 'PREROUTING', spec: '-p 802_1Q -j DROP' },
  {
    chain: 'POSTROUTING',
    spec: `-s Unicast -o eth0 -j snat --to-src ${LOCAL_MAC} --snat-arp --snat-target ACCEPT`,
  },
  arp('198.51.100.50', LOCAL_MAC), // MAC of a local interface: live
];

function host(): FakeHost {
  const h = new FakeHost();
  h.addrs = [{ ifname: 'azure0', address: LOCAL_MAC, addr_info: [{ local: NODE_IP }] }];
  h.routes4 = [
    { dst: '198.51.100.0/24', dev: 'azure0' },
    { dst: '198.51.100.13', dev: 'lxc13' },
  ];
  h.rules = [...PROTECTED];
  return h;
}

/**
 * An assertion inside a fast-check property must throw: fast-check then sees the failing run,
 * shrinks it and reports the counterexample (a tap assertion would only record and go on).
 */
function check(cond: boolean, message: string): void {
  if (!cond) throw new Error(message);
}
function checkEqual<T>(actual: T, expected: T, message: string): void {
  if (actual !== expected) throw new Error(`${message}: ${String(actual)} !== ${String(expected)}`);
}

const pods: PodInfo[] = [{ namespace: 'kube-system', name: 'lxc-health', ips: ['198.51.100.13'] }];
const input = { pods, nodeAddresses: [NODE_IP] };

/** A Cleaner of host `h` on a stepping clock: confirms after 2 s and deletes, unless told otherwise. */
function cleaner(h: FakeHost, opts: { confirmMs?: number; dryRun?: boolean } = {}) {
  const clock = steppingClock();
  const c = new Cleaner({
    runner: h,
    log,
    clock,
    confirmMs: opts.confirmMs ?? 2000,
    dryRun: opts.dryRun ?? false,
  });
  return { c, clock };
}

t.test('Cleaner passes against a fake host', async (t) => {
  t.test(
    'deletes only on the second pass at least the confirmation interval later, in one batch',
    async (t) => {
      const h = host();
      const stale = [
        arp('198.51.100.12', '02:aa:00:00:00:12'),
        dnat('198.51.100.12', '02:aa:00:00:00:12'),
        arp('198.51.100.13', '02:aa:00:00:00:13'),
      ];
      h.rules.push(...stale);
      h.neighbours = [
        { dst: '198.51.100.13', dev: 'azure0', lladdr: '02:aa:00:00:00:13', state: ['PERMANENT'] },
        { dst: '198.51.100.200', dev: 'azure0', lladdr: '02:dd:00:00:00:c8', state: ['PERMANENT'] },
      ];
      const { c, clock } = cleaner(h);
      const p1 = await c.pass(input);
      t.equal(p1.staleRules.length, 3);
      t.equal(p1.removedRules.length, 0);
      t.equal(p1.pendingUntil, 2000);
      clock.t = 1500;
      const p2 = await c.pass(input);
      t.equal(p2.removedRules.length, 0, 'an event-triggered pass too soon does not count twice');
      clock.t = 2000;
      const p3 = await c.pass(input);
      t.strictSame(p3.removedRules.map((r) => r.rule.spec).sort(), stale.map((r) => r.spec).sort());
      t.strictSame(
        p3.removedNeighbours.map((n) => n.key),
        ['198.51.100.13|azure0'],
      );
      t.strictSame(h.rules, PROTECTED);
      t.strictSame(
        h.neighbours.map((n) => n.dst),
        ['198.51.100.200'],
      );
      t.equal(h.calls.filter((x) => x === 'nft -f -').length, 1, 'one batch, by proven handles');
      t.ok(!h.calls.some((x) => x.startsWith('ebtables-restore')));
      t.equal(h.calls.filter((x) => x.startsWith('ip -force -batch')).length, 1);
      t.equal(p3.pendingUntil, undefined);
    },
  );

  t.test(
    'reinstall race: rules re-added after a pass go on the following passes, never the same one',
    async (t) => {
      const h = host();
      const r = arp('198.51.100.12', '02:aa:00:00:00:12');
      h.rules.push(r);
      const { c, clock } = cleaner(h);
      await c.pass(input);
      clock.t = 2000;
      t.equal((await c.pass(input)).removedRules.length, 1);
      h.rules.push(r); // azure-vnet restores it from azure-vnet.json
      clock.t = 4000;
      const again = await c.pass(input);
      t.equal(again.staleRules.length, 1);
      t.equal(again.removedRules.length, 0, 'first sighting after re-add');
      clock.t = 6000;
      t.equal((await c.pass(input)).removedRules.length, 1);
      t.equal(h.deleted.length, 2);
    },
  );

  t.test('a rule that stops being stale between passes is left alone (run broken)', async (t) => {
    const h = host();
    h.rules.push(arp('198.51.100.13', '02:aa:00:00:00:13'));
    const { c, clock } = cleaner(h);
    await c.pass(input);
    // The MAC shows up in the bridge FDB on a local (veth) port: known here now.
    h.addrs.push({
      ifname: 'veth1',
      address: '02:00:00:00:01:01',
      addr_info: [],
      linkinfo: { info_kind: 'veth' },
    });
    h.fdb = [{ mac: '02:aa:00:00:00:13', ifname: 'veth1', master: 'azure0', state: '', flags: [] }];
    clock.t = 2000;
    await c.pass(input);
    h.fdb = [];
    clock.t = 3000;
    t.equal((await c.pass(input)).removedRules.length, 0, 'stale again, but only since 3000');
    clock.t = 5000;
    t.equal((await c.pass(input)).removedRules.length, 1);
  });

  t.test('re-lists before deleting and survives a rule vanishing under the batch', async (t) => {
    const h = host();
    const a = arp('198.51.100.12', '02:aa:00:00:00:12');
    const b = dnat('198.51.100.12', '02:aa:00:00:00:12');
    h.rules.push(a, b);
    const { c, clock } = cleaner(h);
    await c.pass(input);
    clock.t = 2000;
    h.beforeRestore = (() => {
      let n = 0;
      return () => {
        // Vanishes right before the handle batch; the first spec batch then also fails on it.
        if (n++ === 0) h.rules = h.rules.filter((r) => r !== a);
      };
    })();
    const p = await c.pass(input);
    t.strictSame(p.errors, []);
    t.strictSame(
      p.removedRules.map((r) => r.rule.spec),
      [b.spec],
    );
    t.strictSame(h.rules, PROTECTED);
    // The handle batch failed as a whole; the spec batch was then tried, failed too, and the re-list retry won.
    t.strictSame(
      h.calls.filter((x) => x === 'nft -f -' || x.startsWith('ebtables-restore')),
      ['nft -f -', 'ebtables-restore --noflush', 'ebtables-restore --noflush'],
    );
  });

  t.test('dry-run reports what would go and deletes nothing', async (t) => {
    const h = host();
    h.rules.push(arp('198.51.100.12', '02:aa:00:00:00:12'));
    const { c } = cleaner(h, { confirmMs: 0, dryRun: true });
    await c.pass(input);
    const p = await c.pass(input);
    t.equal(p.dryRun, true);
    t.equal(p.removedRules.length, 1);
    t.equal(h.deleted.length, 0);
    t.ok(!h.calls.some((x) => x.startsWith('ebtables-restore')));
  });

  t.test('legacy flavour: parses zero-stripped listings and deletes per rule by exact spec', async (t) => {
    const h = host();
    h.flavour = 'legacy';
    h.rules.push(arp('198.51.100.12', '02:aa:00:00:00:12'));
    const { c } = cleaner(h, { confirmMs: 0 });
    await c.pass(input);
    const p = await c.pass(input);
    t.equal(p.removedRules.length, 1);
    t.ok(
      h.calls.includes(
        'ebtables -t nat -D PREROUTING -p ARP --arp-op Request --arp-ip-dst 198.51.100.12 -j arpreply --arpreply-mac 2:aa:0:0:0:12',
      ),
    );
    t.strictSame(h.rules, PROTECTED);
  });

  t.test('an unusable flavour is reported clearly; neighbours are still cleaned', async (t) => {
    const h = host();
    h.flavour = 'legacy';
    h.failListing = true;
    h.neighbours = [
      { dst: '198.51.100.13', dev: 'azure0', lladdr: '02:aa:00:00:00:13', state: ['PERMANENT'] },
    ];
    const c = cleaner(h, { confirmMs: 0 }).c;
    const s = await c.detectEbtables();
    t.equal(s.usable, false);
    t.match(
      s.error!,
      /ebtables \(legacy\) is not usable: .*can't initialize ebtables table 'nat'.*ebtable_nat kernel module/,
    );
    await c.pass(input);
    const p = await c.pass(input);
    t.equal(p.removedNeighbours.length, 1);
    t.equal(h.neighbours.length, 0);
  });
});

t.test('the pod view is re-read before anything is deleted', async (t) => {
  const stale = arp('198.51.100.12', '02:aa:00:00:00:12');

  t.test('a re-read that fails holds the pass: nothing deleted, no tight retry loop', async (t) => {
    const h = host();
    h.rules.push(stale);
    const { c, clock } = cleaner(h);
    const recheck = async () => {
      throw new Error('connect ECONNREFUSED');
    };
    await c.pass({ ...input, recheck });
    clock.t = 2000;
    const p = await c.pass({ ...input, recheck });
    t.equal(p.removedRules.length, 0);
    t.match(p.held ?? '', /could not be re-read .*ECONNREFUSED.*nothing deleted/);
    t.equal(h.deleted.length, 0);
    t.equal(p.pendingUntil, undefined, 'a held item does not schedule an immediate follow-up');
  });

  t.test(
    'a pod that appeared since the cached view owns its rule: kept (tunnel mode: live only via its pod)',
    async (t) => {
      const h = host();
      const tunnel = arp('198.51.100.12', '12:34:56:78:9a:bc');
      h.rules.push(tunnel);
      // The pod's neighbour on its route device carries the shared gateway MAC.
      h.neighbours = [
        { dst: '198.51.100.12', dev: 'azure0', lladdr: '12:34:56:78:9a:bc', state: ['REACHABLE'] },
      ];
      const { c, clock } = cleaner(h);
      await c.pass(input); // the cached view does not have the pod yet
      clock.t = 2000;
      const now: PodInfo[] = [...pods, { namespace: 'a', name: 'new', ips: ['198.51.100.12'] }];
      const p = await c.pass({ ...input, recheck: async () => ({ pods: now }) });
      t.equal(p.removedRules.length, 0);
      t.ok(h.rules.some((r) => r.spec === tunnel.spec));
      // Without the re-read the same pass deletes the live rule: that is what the re-read prevents.
      const h2 = host();
      h2.rules.push(tunnel);
      h2.neighbours = h.neighbours;
      const c2 = cleaner(h2, { confirmMs: 0 }).c;
      await c2.pass(input);
      t.equal((await c2.pass(input)).removedRules.length, 1);
    },
  );

  t.test('items first seen after an IP-less pod appeared are kept; older ones go', async (t) => {
    const h = host();
    h.rules.push(stale);
    const { c, clock } = cleaner(h);
    await c.pass(input); // old stale rule first seen at 0
    clock.t = 1000;
    const fresh = arp('198.51.100.60', '12:34:56:78:9a:bc'); // CNI ADD of a pod with no IP in the API yet
    h.rules.push(fresh);
    await c.pass(input);
    clock.t = 4000;
    const p = await c.pass({ ...input, recheck: async () => ({ pods, holdFrom: 500 }) });
    t.strictSame(
      p.removedRules.map((r) => r.rule.spec),
      [stale.spec],
    );
    t.equal(p.heldForNewPods, 1);
    t.ok(
      h.rules.some((r) => r.spec === fresh.spec),
      "the new pod's rule stays",
    );
  });
});

t.test('unreadable listings', async (t) => {
  t.test('an unparsable nat listing is an error of the pass; neighbours are still cleaned', async (t) => {
    const h = host();
    h.neighbours = [
      { dst: '198.51.100.13', dev: 'azure0', lladdr: '02:aa:00:00:00:13', state: ['PERMANENT'] },
    ];
    h.listing = () =>
      'Bridge table: nat\n\nBridge chain: PREROUTING, entries: 5, policy: ACCEPT\n-j ACCEPT\n';
    const c = cleaner(h, { confirmMs: 0 }).c;
    await c.pass(input);
    const p = await c.pass(input);
    t.match(p.errors[0]!, /ebtables -t nat -L: chain PREROUTING: header says 5 entries, listed 1/);
    t.equal(p.removedNeighbours.length, 1);
    t.equal(h.deleted.length, 0);
  });
});

t.test('handle-based batch (nft flavour)', async (t) => {
  t.test(
    'falls back to ebtables-restore by spec when the chain changes between the bracketing listings',
    async (t) => {
      const h = host();
      const stale = arp('198.51.100.12', '02:aa:00:00:00:12');
      h.rules.push(stale);
      const { c, clock } = cleaner(h);
      await c.pass(input);
      clock.t = 2000;
      let listings = 0;
      const late = dnat('198.51.100.99', '02:aa:00:00:00:99');
      h.afterNftList = () => {
        if (listings++ === 0) h.rules.push(late); // azure-vnet adds a rule mid-listing
      };
      const p = await c.pass(input);
      t.strictSame(
        p.removedRules.map((r) => r.rule.spec),
        [stale.spec],
      );
      t.ok(!h.calls.includes('nft -f -'), 'unproven handles are never used');
      t.ok(h.calls.includes('ebtables-restore --noflush'));
      t.ok(h.rules.includes(late), 'the late rule was never judged twice');
    },
  );

  t.test('falls back when nft is missing', async (t) => {
    const h = host();
    h.nftAvailable = false;
    h.rules.push(arp('198.51.100.12', '02:aa:00:00:00:12'));
    const { c } = cleaner(h, { confirmMs: 0 });
    await c.pass(input);
    t.equal((await c.pass(input)).removedRules.length, 1);
    t.strictSame(h.rules, PROTECTED);
  });

  t.test('deletes duplicates by their own handles', async (t) => {
    const h = host();
    h.rules.push(arp('198.51.100.12', '02:aa:00:00:00:12'), arp('198.51.100.12', '02:aa:00:00:00:12'));
    const { c } = cleaner(h, { confirmMs: 0 });
    await c.pass(input);
    t.equal((await c.pass(input)).removedRules.length, 2);
    t.strictSame(h.rules, PROTECTED);
    t.ok(h.calls.includes('nft -f -'));
  });
});

t.test('property: generated rulesets, reinstalls and clock jumps', async (t) => {
  t.test(
    'never deletes a protected or live item; every deletion was stale on two passes >= confirm apart',
    async (t) => {
      const ipArb = fc.oneof(
        fc.integer({ min: 1, max: 40 }).map((i) => `198.51.100.${i}`),
        fc.constant(NODE_IP),
      );
      const macArb = fc.integer({ min: 1, max: 6 }).map((i) => `02:aa:00:00:00:0${i}`);
      const ruleArb = fc.record({
        kind: fc.constantFrom('arp', 'dnat'),
        ip: ipArb,
        mac: fc.oneof(macArb, fc.constant(LOCAL_MAC), fc.constant('12:34:56:78:9a:bc')),
      });
      const neighArb = fc.record({
        dst: fc.constantFrom('198.51.100.13', '198.51.100.12', '198.51.100.200'),
        dev: fc.constantFrom('azure0', 'lxc13'),
        state: fc.constantFrom('PERMANENT', 'FAILED', 'INCOMPLETE', 'REACHABLE', 'STALE'),
      });
      const stepArb = fc.record({
        advance: fc.constantFrom(0, 300, 1000, 2000, 2500),
        add: fc.array(ruleArb, { maxLength: 4 }),
        removeFirst: fc.nat({ max: 3 }),
        // A rule azure-vnet adds while the pass is listing (between the nft listings).
        midListing: fc.option(ruleArb, { nil: undefined }),
        // The kernel keeps one entry per (IP, device).
        neighbours: fc.option(
          fc.uniqueArray(neighArb, { maxLength: 4, selector: (n) => `${n.dst}|${n.dev}` }),
          {
            nil: undefined,
          },
        ),
      });
      await t.resolves(
        fc.assert(
          fc.asyncProperty(
            fc.constantFrom<'nft' | 'legacy'>('nft', 'legacy'),
            fc.array(ruleArb, { maxLength: 20 }),
            fc.array(stepArb, { minLength: 1, maxLength: 8 }),
            async (flavour, initial, steps) => {
              const h = host();
              h.flavour = flavour;
              const mk = (r: { kind: string; ip: string; mac: string }) =>
                r.kind === 'arp' ? arp(r.ip, r.mac) : dnat(r.ip, r.mac);
              h.rules.push(...initial.map(mk));
              const { c, clock } = cleaner(h);
              // What each pass saw at its start: the oracle for "stale on two passes".
              const history: { t: number; present: Set<string> }[] = [];
              const seenTwice = (key: string) => {
                for (let i = history.length - 1; i >= 0; i--) {
                  if (!history[i]!.present.has(key)) return false;
                  if (clock.t - history[i]!.t >= 2000) return true;
                }
                return false;
              };
              for (const step of steps) {
                clock.t += step.advance;
                h.rules.splice(PROTECTED.length, step.removeFirst);
                h.rules.push(...step.add.map(mk));
                if (step.neighbours)
                  h.neighbours = step.neighbours.map((n) => ({
                    dst: n.dst,
                    dev: n.dev,
                    state: [n.state],
                    ...(n.state === 'FAILED' || n.state === 'INCOMPLETE'
                      ? {}
                      : { lladdr: '02:aa:00:00:00:13' }),
                  }));
                let mid = step.midListing ? mk(step.midListing) : undefined;
                h.afterNftList = () => {
                  if (mid) h.rules.push(mid);
                  mid = undefined;
                };
                const before = h.deleted.length;
                const beforeN = h.deletedNeighbours.length;
                history.push({
                  t: clock.t,
                  present: new Set([
                    ...h.rules.map((r) => r.spec),
                    ...h.neighbours.map((n) => `${n.dst}|${n.dev}`),
                  ]),
                });
                await c.pass(input);
                for (const d of h.deleted.slice(before)) {
                  check(!PROTECTED.some((p) => p.spec === d.spec), `protected deleted: ${d.spec}`);
                  check(!d.spec.includes(LOCAL_MAC), `live deleted: ${d.spec}`);
                  check(!d.spec.includes(` ${NODE_IP} `), `node address rule deleted: ${d.spec}`);
                  check(seenTwice(d.spec), `deleted without two sightings >= 2 s apart: ${d.spec}`);
                }
                for (const n of h.deletedNeighbours.slice(beforeN)) {
                  checkEqual(n.dst, '198.51.100.13', 'only neighbours of current pods');
                  checkEqual(n.dev, 'azure0', 'never the one on the pod route device');
                  check(['PERMANENT', 'FAILED', 'INCOMPLETE'].includes(n.state[0]!), String(n.state[0]));
                  check(seenTwice(`${n.dst}|${n.dev}`), `neighbour deleted too early: ${n.dst}`);
                }
              }
            },
          ),
          { numRuns: 200 },
        ),
        'the property holds on every generated run',
      );
    },
  );
});
