// Reading `ip -j` output shared by the L2 handover and the stale API server's fence.
import t from 'tap';
import { ownAddresses, parseIpJson } from '../../../sidecar/ip-json.ts';

t.test('ownAddresses: every address of every link from `ip -j addr show`, link-local included', async (t) => {
  const json = JSON.stringify([
    {
      ifname: 'lo',
      addr_info: [
        { family: 'inet', local: '127.0.0.1' },
        { family: 'inet6', local: '::1' },
      ],
    },
    {
      ifname: 'eth0',
      addr_info: [
        { family: 'inet', local: '198.51.100.1', prefixlen: 24 },
        { family: 'inet6', local: 'fe80::1', scope: 'link' },
      ],
    },
    { ifname: 'veth1', addr_info: [] },
  ]);
  t.strictSame(ownAddresses(json), ['127.0.0.1', '198.51.100.1', '::1', 'fe80::1']);
  t.strictSame(ownAddresses('not json'), []);
  t.strictSame(ownAddresses('{}'), []);
});

t.test('ownAddresses: not those on kube-ipvs0 or kube-dummy-if, nor any VIP named', async (t) => {
  const json = JSON.stringify([
    { ifname: 'eth0', addr_info: [{ local: '198.51.100.1' }, { local: '2001:DB8::5' }] },
    { ifname: 'kube-ipvs0', addr_info: [{ local: '198.51.100.100' }] },
    { ifname: 'kube-dummy-if', addr_info: [{ local: '10.96.0.1' }] },
  ]);
  t.strictSame(ownAddresses(json), ['198.51.100.1', '2001:DB8::5']);
  t.strictSame(ownAddresses(json, ['2001:db8::5']), ['198.51.100.1']);
});

t.test('parseIpJson: an array of objects, [] for anything else', async (t) => {
  t.strictSame(parseIpJson('[{"ifname":"eth0"}]'), [{ ifname: 'eth0' }]);
  t.strictSame(parseIpJson('{"ifname":"eth0"}'), []);
  t.strictSame(parseIpJson(''), []);
});
