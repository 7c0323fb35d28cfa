// The robustness runner's pure parts: the nft path drop it loads into a node's namespace, the
// kinds it implements, and how it reads eligibility and fences from the API's objects.
import t from 'tap';
import { L2_STATE_ANNOTATION } from '../../../shared/names.ts';
import { IMPLEMENTED, renderPathDrop } from '../../robustness/nemesis.ts';
import { FAULT_KINDS, FAULTS, planTrial } from '../../robustness/plan.ts';
import { eligibleNodes, fencedNodes, type PodView } from '../../robustness/scene.ts';

t.test('the path drop: host traffic on output/input, pod traffic on forward, per direction', async (t) => {
  const to = 'ip daddr 10.1.2.3 tcp dport 6443 drop';
  const from = 'ip saddr 10.1.2.3 tcp sport 6443 drop';
  const chains = (text: string) =>
    Object.fromEntries(
      [
        ...text.matchAll(/chain (\w+) \{\n {4}type filter hook (\w+) priority 0;\n((?: {4}.*\n)*?) {2}\}/g),
      ].map((m) => [
        m[2],
        (m[3] as string)
          .trim()
          .split('\n')
          .filter(Boolean)
          .map((l) => l.trim()),
      ]),
    );
  t.same(chains(renderPathDrop('10.1.2.3', '6443', 'to-api')), { output: [to], input: [], forward: [to] });
  t.same(chains(renderPathDrop('10.1.2.3', '6443', 'from-api')), {
    output: [],
    input: [from],
    forward: [from],
  });
  t.same(chains(renderPathDrop('10.1.2.3', '6443', 'both')), {
    output: [to],
    input: [from],
    forward: [to, from],
  });
  t.match(renderPathDrop('10.1.2.3', '6443', 'both'), /^table inet robustness \{/);
});

t.test('the runner implements eleven kinds; the planner picks among them only', async (t) => {
  t.equal(IMPLEMENTED.length, 11);
  t.ok(IMPLEMENTED.every((k) => FAULT_KINDS.includes(k)));
  t.same(
    FAULT_KINDS.filter((k) => !IMPLEMENTED.includes(k)),
    ['api-429', 'stale-api-server'],
  );
  t.notOk(
    IMPLEMENTED.some((k) => (FAULTS[k] as { ha?: boolean }).ha),
    'none needs the HA control plane',
  );
  const picked = new Set(
    [...Array(200).keys()].flatMap((i) => planTrial(5, i, { kinds: IMPLEMENTED }).faults.map((f) => f.kind)),
  );
  t.ok([...picked].every((k) => IMPLEMENTED.includes(k)));
});

const speaker = (node: string, ready: boolean, deleting = false): PodView => ({
  metadata: {
    name: `speaker-${node}`,
    namespace: 'metallb-system',
    uid: node,
    ...(deleting ? { deletionTimestamp: '2026-11-24T00:00:00Z' } : {}),
  },
  spec: { nodeName: node },
  status: {
    containerStatuses: [
      { name: 'speaker', ready, restartCount: 0 },
      { name: 'drainguard', ready: true, restartCount: 0 },
    ],
  },
});

t.test('eligible: nodes whose speaker container is Ready and not being deleted', async (t) => {
  t.same(
    eligibleNodes([
      speaker('node-c', true),
      speaker('node-a', true),
      speaker('node-b', false),
      speaker('node-d', true, true),
    ]),
    ['node-a', 'node-c'],
  );
});

t.test('fenced: nodes whose L2 state says the fence is on', async (t) => {
  const node = (name: string, state?: unknown) => {
    const annotations: Record<string, string> = {};
    if (state !== undefined) annotations[L2_STATE_ANNOTATION] = JSON.stringify(state);
    return { metadata: { name, annotations } };
  };
  t.same(
    fencedNodes([
      node('a', { phase: 'fenced', fenced: true }),
      node('b', { phase: 'labelled', fenced: false }),
      node('c'),
      { metadata: { name: 'd', annotations: { [L2_STATE_ANNOTATION]: '{' } } },
    ]),
    ['a'],
  );
});
