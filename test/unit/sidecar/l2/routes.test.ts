import t from 'tap';
import { linkNames, localRoute, routeDevice, subnetLink } from '../../../../sidecar/l2/routes.ts';

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

t.test('routeDevice and localRoute: a VIP bound here (kube-ipvs0) is local, with no link', async (t) => {
  const got = '[{"type":"local","dst":"198.51.100.100","dev":"lo","prefsrc":"198.51.100.100","flags":[]}]';
  t.equal(routeDevice(got), undefined);
  t.equal(localRoute(got), true);
  t.equal(localRoute('[{"dst":"198.51.100.100","dev":"eth0","flags":[]}]'), false);
  t.equal(localRoute('garbage'), false);
  t.equal(
    routeDevice('[{"dst":"10.96.0.1","dev":"kube-ipvs0","flags":[]}]'),
    undefined,
    'never a Service-IP link',
  );
});

t.test(
  'subnetLink: the longest prefix holding the VIP, lowest metric among equals, else default',
  async (t) => {
    const main = JSON.stringify([
      { dst: 'default', gateway: '192.0.2.254', dev: 'ens5', flags: [] },
      { dst: '198.51.100.0/24', dev: 'eth1', metric: 100, flags: [] },
      { dst: '198.51.100.0/24', dev: 'eth0', flags: [] },
      { dst: '198.51.100.0/25', dev: 'bond0', metric: 10, flags: [] },
      { type: 'unreachable', dst: '198.51.100.96/28', flags: [] },
      { dst: '198.51.100.120', dev: 'kube-ipvs0', flags: [] },
      { dst: '198.51.100.121', dev: 'lo', flags: [] },
    ]);
    t.equal(subnetLink('198.51.100.100', main), 'bond0');
    t.equal(subnetLink('198.51.100.200', main), 'eth0');
    t.equal(subnetLink('198.51.100.120', main), 'bond0', 'not the Service-IP link');
    t.equal(subnetLink('203.0.113.1', main), 'ens5');
    t.equal(subnetLink('2001:db8::1', JSON.stringify([{ dst: '198.51.100.0/24', dev: 'eth0' }])), undefined);
    t.equal(subnetLink('198.51.100.1', '[]'), undefined);
    t.equal(subnetLink('not an ip', main), undefined);
  },
);

t.test('linkNames: the names in `ip -j link show`', async (t) => {
  t.strictSame(linkNames('[{"ifname":"lo"},{"ifname":"eth0"},{"ifindex":3}]'), ['lo', 'eth0']);
  t.strictSame(linkNames('oops'), []);
});
