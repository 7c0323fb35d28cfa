import { readFileSync, writeFileSync } from 'node:fs';
import t, { type Test } from 'tap';
import { apiFenceTableIn, renderApiUnfence } from '../../../../shared/net/fence-tables.ts';
import {
  killArgs,
  killedCount,
  parseApiFence,
  probeSource,
  renderApiFence,
  sameApiFence,
  validateApiFence,
} from '../../../../sidecar/api-fence/fence.ts';

const golden = (t: Test, name: string, actual: string) => {
  const url = new URL(`../../../golden/l2/${name}`, import.meta.url);
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(url, actual);
  t.equal(actual, readFileSync(url, 'utf8'), `golden ${name} differs (UPDATE_GOLDEN=1 to accept)`);
};
const read = (name: string) => readFileSync(new URL(`../../../golden/l2/${name}`, import.meta.url), 'utf8');

const both = [
  { address: '192.0.2.11', port: 6443 },
  { address: '2001:DB8::11', port: 6443 },
  { address: '192.0.2.11', port: 6443 },
];

t.test(
  'renders one replace transaction: loopback sources pass (the probe), every other gets a reset',
  async (t) => {
    golden(t, 'api-fence.nft', renderApiFence(both));
    const v4 = renderApiFence([{ address: '192.0.2.11', port: 6443 }]);
    t.notMatch(v4, /api6/, 'no IPv6 set without an IPv6 endpoint (an empty set is invalid nft)');
    t.ok(v4.indexOf('delete table inet drainguard-api') < v4.indexOf('table inet drainguard-api {\n'));
    t.match(
      v4,
      /ip saddr 127\.0\.0\.1 accept\n.*\n {4}ip daddr \. tcp dport @api4 counter reject with tcp reset/,
    );
    t.equal(renderApiUnfence(), 'table inet drainguard-api {}\ndelete table inet drainguard-api\n');
  },
);

t.test('bad input is refused, naming the field', async (t) => {
  t.throws(() => renderApiFence([{ address: '192.0.2.1; flush ruleset', port: 6443 }]), /address/);
  t.strictSame(validateApiFence([{ address: '192.0.2.1', port: 0 }]), ['port: 0 is not a port 1-65535']);
});

t.test('reads the fence back from real nft 1.0.6 output', async (t) => {
  // Captured from `nft -j list table inet drainguard-api` after installing api-fence.nft.
  const back = parseApiFence(read('list-api-fence.json'));
  t.strictSame(back, [
    { address: '2001:db8::11', port: 6443 },
    { address: '192.0.2.11', port: 6443 },
  ]);
  t.ok(sameApiFence(back, both), 'equal to what was asked (case, order, duplicates aside)');
  t.equal(parseApiFence('{"nftables": []}'), undefined, 'no table: no fence');
  t.ok(apiFenceTableIn(read('list-tables-api.json')));
  t.notOk(apiFenceTableIn(read('list-tables.json')), "the L2 fence's tables are not this one");
});

t.test('ss destroys the server side of established connections to the endpoint', async (t) => {
  t.equal(
    killArgs({ address: '192.0.2.11', port: 6443 }).join(' '),
    '-K -H -tn state established src 192.0.2.11 and not dst 127.0.0.1 and ( sport = :6443 )',
    "the server side of every connection but the probe's (from loopback)",
  );
  const v6 = killArgs({ address: '2001:db8::11', port: 6443 });
  t.equal(v6[6], '[2001:db8::11]', 'ss wants IPv6 bracketed');
  t.equal(v6[10], '[::1]');
  t.equal(probeSource({ address: '2001:db8::11', port: 6443 }), '::1');
  t.equal(probeSource({ address: '192.0.2.11', port: 6443 }), '127.0.0.1');
  t.equal(killedCount('0 0 192.0.2.11:6443 192.0.2.12:58034\n0 0 192.0.2.11:6443 192.0.2.13:1\n'), 2);
  t.equal(killedCount(''), 0);
});
