// The robustness runner's pure parts: the nft path drop and the 429 redirect it loads into a node's
// namespace, whose requests the 429 fault refuses, the kinds it implements, and how it reads eligibility and fences from the API's objects.
import t from 'tap';
import {
  eligibleNodes,
  fencedNodes,
  JUST_RESTARTED_MS,
  type PodView,
  RENEW_AFTER_RESTARTS,
  speakersJustRestarted,
  wornPods,
} from '../../../lab/cluster/robustness-scene.ts';
import { L2_STATE_ANNOTATION } from '../../../shared/names.ts';
import {
  execFoundNoContainer,
  IMPLEMENTED,
  IMPLEMENTED_HA,
  isSidecarRequest,
  renderApiRedirect,
  renderPathDrop,
} from '../../robustness/nemesis.ts';
import { goneRules, perPodRules } from '../../robustness/netfilter.ts';
import { FAULT_KINDS, FAULTS, planTrial } from '../../robustness/plan.ts';

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

t.test(
  'the 429 redirect: new connections to the kubernetes Service go to the proxy, before kube-proxy',
  async (t) => {
    const text = renderApiRedirect('198.51.100.254', 40123);
    const rule = 'ip daddr 10.96.0.1 tcp dport 443 dnat to 198.51.100.254:40123';
    const hooks = [...text.matchAll(/type nat hook (\w+) priority (-?\d+);\n {4}(.*)\n/g)].map((m) => [
      m[1],
      Number(m[2]),
      m[3],
    ]);
    // Pods' connections pass prerouting, host-network pods' (the speakers' sidecars) output; -101
    // comes before kube-proxy's DNAT (-100), and a connection's first NAT decides.
    t.same(hooks, [
      ['prerouting', -101, rule],
      ['output', -101, rule],
    ]);
    t.match(text, /^table ip robustness_429 \{/);
  },
);

t.test("the 429 fault refuses the sidecars' requests only", async (t) => {
  t.ok(isSidecarRequest({ 'user-agent': 'drainguard-sidecar/node-a' }));
  t.notOk(isSidecarRequest({ 'user-agent': 'speaker-sim/node-a' }), 'the speaker simulator');
  t.notOk(isSidecarRequest({ 'user-agent': 'lease-candidate/skupper-router-1' }), 'the Lease candidates');
  t.notOk(isSidecarRequest({ 'user-agent': 'kubelet/v1.20.15' }));
  t.notOk(isSidecarRequest({}));
});

t.test('the runner implements twelve kinds; the planner picks among them only', async (t) => {
  t.equal(IMPLEMENTED.length, 12);
  t.ok(IMPLEMENTED.every((k) => FAULT_KINDS.includes(k)));
  t.same(
    FAULT_KINDS.filter((k) => !IMPLEMENTED.includes(k)),
    ['stale-api-server'],
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

t.test('on the HA lab: the stale API server too, not the faults aimed at one API server', async (t) => {
  t.ok(IMPLEMENTED_HA.includes('stale-api-server'));
  t.notOk(IMPLEMENTED_HA.includes('api-path-drop'));
  t.notOk(IMPLEMENTED_HA.includes('api-429'));
  t.equal(IMPLEMENTED_HA.length, 11);
  const picked = [...Array(300).keys()].flatMap((i) =>
    planTrial(7, i, { kinds: IMPLEMENTED_HA, ha: true }).faults.map((f) => f.kind),
  );
  t.ok(picked.includes('stale-api-server'), 'planned in HA runs');
  t.ok(picked.every((k) => IMPLEMENTED_HA.includes(k)));
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

t.test(
  "the netfilter scene's rules: azure-vnet's per-pod shapes, a gone pod's address in the node's subnet",
  async (t) => {
    t.strictSame(perPodRules('10.244.1.7', '0a:58:0a:f4:01:07'), [
      '-p ARP --arp-op Request --arp-ip-dst 10.244.1.7 -j arpreply --arpreply-mac 0a:58:0a:f4:01:07',
      '-p IPv4 -i eth0 --ip-dst 10.244.1.7 -j dnat --to-dst 0a:58:0a:f4:01:07 --dnat-target ACCEPT',
    ]);
    t.match(
      goneRules('10.244.2.0/24')[0],
      /--arp-ip-dst 10\.244\.2\.250 -j arpreply --arpreply-mac 02:aa:00:00:00:fa$/,
    );
  },
);

t.test('worn pods: a container restarted often enough to be in a long crash backoff', async (t) => {
  const pod = (name: string, restarts: number[], deleting = false): PodView => ({
    metadata: {
      name,
      namespace: 'metallb-system',
      uid: name,
      ...(deleting ? { deletionTimestamp: 'x' } : {}),
    },
    spec: { nodeName: 'node-b' },
    status: {
      containerStatuses: restarts.map((n, i) => ({ name: `c${i}`, ready: true, restartCount: n })),
    },
  });
  const pods = [
    pod('fresh', [0, 0]),
    pod('speaker-worn', [RENEW_AFTER_RESTARTS, 0]),
    pod('sidecar-worn', [0, RENEW_AFTER_RESTARTS + 4]),
    pod('almost', [RENEW_AFTER_RESTARTS - 1, RENEW_AFTER_RESTARTS - 1]),
    pod('going', [9], true),
  ];
  t.strictSame(
    wornPods(pods).map((p) => p.metadata.name),
    ['speaker-worn', 'sidecar-worn'],
    'either container; not one already being deleted',
  );
});

t.test(
  'a speaker restarted less than 12 s ago keeps the scene from being at rest (drainguard hands back after 10 s)',
  async (t) => {
    const now = Date.parse('2026-11-27T17:00:00Z');
    const speaker = (node: string, restartCount: number, agoMs: number | undefined): PodView => ({
      metadata: { name: `speaker-${node}`, namespace: 'metallb-system', uid: node },
      spec: { nodeName: node },
      status: {
        containerStatuses: [
          {
            name: 'speaker',
            ready: true,
            restartCount,
            state: agoMs === undefined ? {} : { running: { startedAt: new Date(now - agoMs).toISOString() } },
          },
        ],
      },
    });
    t.strictSame(
      speakersJustRestarted(
        [
          speaker('node-c', 1, 3_000),
          speaker('node-a', 0, 1_000),
          speaker('node-b', 2, JUST_RESTARTED_MS + 1),
          speaker('node-d', 1, undefined),
        ],
        now,
      ),
      ['node-c'],
      'restarted 3 s ago; not a first start, not one serving long enough, not one not running',
    );
  },
);

t.test(
  'an exec refused for a container not running is a fault not injected, other refusals errors',
  async (t) => {
    // SEED=112 TRIAL=227: the liveness fault's touch 0.3 s after the speaker's kill.
    t.ok(execFoundNoContainer('error: unable to upgrade connection: container not found ("speaker")'));
    t.ok(
      execFoundNoContainer(
        'error: Internal error occurred: error executing command in container: container not running',
      ),
    );
    t.notOk(execFoundNoContainer('error: unable to upgrade connection: pod does not exist'));
    t.notOk(
      execFoundNoContainer(
        'Error from server: error dialing backend: dial tcp 198.51.100.3:10250: connect: connection refused',
      ),
    );
    t.notOk(execFoundNoContainer('error: You must be logged in to the server (Unauthorized)'));
  },
);
