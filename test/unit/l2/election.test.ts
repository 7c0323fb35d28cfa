import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { EXCLUDE_LABEL, eligible, liveMembers, owner } from '../../../lab/sim/speaker/election.ts';
import type { Node } from '../../../shared/kube/types.ts';

const node = (name: string, labels: Record<string, string> = {}, netDown = false): Node => ({
  metadata: { name, labels },
  status: { conditions: netDown ? [{ type: 'NetworkUnavailable', status: 'True' }] : [] },
});

test('simulator election: sha256(node#vip) order, first wins', () => {
  const vip = '192.0.2.100';
  const nodes = ['node-a', 'node-b', 'node-c'];
  const key = (n: string) => createHash('sha256').update(`${n}#${vip}`).digest('hex');
  const expected = [...nodes].sort((a, b) => key(a).localeCompare(key(b)))[0];
  assert.equal(owner(nodes, vip), expected);
  assert.equal(owner([...nodes].reverse(), vip), expected, 'order of input does not matter');
  assert.equal(owner([], vip), undefined);
});

test('simulator candidates: live members minus excluded (any value) and network-unavailable nodes', () => {
  const live = new Set(['node-a', 'node-b', 'node-c', 'node-d']);
  const nodes = [
    node('node-a'),
    node('node-b', { [EXCLUDE_LABEL]: 'false' }),
    node('node-c', {}, true),
    node('node-d'),
    node('node-e'),
  ];
  assert.deepEqual(eligible(nodes, live), ['node-a', 'node-d']);
});

test('simulator liveness: dead after deadMs without heartbeat, gone at once after leave', () => {
  const view = {
    lastSeen: new Map([
      ['b', 1000],
      ['c', 5000],
    ]),
    left: new Set<string>(),
  };
  assert.deepEqual([...liveMembers('a', view, 5500, 5000)].sort(), ['a', 'b', 'c']);
  assert.deepEqual([...liveMembers('a', view, 6500, 5000)].sort(), ['a', 'c']);
  view.left.add('c');
  assert.deepEqual([...liveMembers('a', view, 6500, 5000)].sort(), ['a']);
});
