import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ownAddresses, routeDevice } from '../../../sidecar/l2/routes.ts';

test('routeDevice: the link of `ip -j route get`, none for local, unreachable or garbage', () => {
  assert.equal(
    routeDevice(
      '[{"dst":"198.51.100.100","dev":"eth0","prefsrc":"198.51.100.1","flags":[],"uid":0,"cache":[]}]',
    ),
    'eth0',
  );
  assert.equal(
    routeDevice('[{"dst":"203.0.113.9","gateway":"198.51.100.254","dev":"ens5","flags":[]}]'),
    'ens5',
  );
  assert.equal(routeDevice('[{"type":"local","dst":"198.51.100.1","dev":"lo","flags":[]}]'), undefined);
  assert.equal(routeDevice('[]'), undefined);
  assert.equal(routeDevice(''), undefined);
  assert.equal(routeDevice('{"dev":"eth0"}'), undefined);
});

test('ownAddresses: every address of every link from `ip -j addr show`, link-local included', () => {
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
  assert.deepEqual(ownAddresses(json), ['127.0.0.1', '198.51.100.1', '::1', 'fe80::1']);
  assert.deepEqual(ownAddresses('not json'), []);
  assert.deepEqual(ownAddresses('{}'), []);
});
