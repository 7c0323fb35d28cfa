import t from 'tap';
import { ownAddresses, routeDevice } from '../../../sidecar/l2/routes.ts';

t.test('routeDevice: the link of `ip -j route get`, none for local, unreachable or garbage', async (t) => {
  t.equal(
    routeDevice(
      '[{"dst":"198.51.100.100","dev":"eth0","prefsrc":"198.51.100.1","flags":[],"uid":0,"cache":[]}]',
    ),
    'eth0',
  );
  t.equal(routeDevice('[{"dst":"203.0.113.9","gateway":"198.51.100.254","dev":"ens5","flags":[]}]'), 'ens5');
  t.equal(routeDevice('[{"type":"local","dst":"198.51.100.1","dev":"lo","flags":[]}]'), undefined);
  t.equal(routeDevice('[]'), undefined);
  t.equal(routeDevice(''), undefined);
  t.equal(routeDevice('{"dev":"eth0"}'), undefined);
});

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
