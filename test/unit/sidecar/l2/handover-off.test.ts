// The L2 handover gate: with DRAINGUARD_SPEAKER_IGNORES_EXCLUDE_LB (the webhook saw the speaker's
// --ignore-exclude-lb) the l2-handover feature loads the feature that runs no handover. Driven
// with fakes: it labels nothing at a cordon, takes back a fence and a label an earlier sidecar
// left, and says why in a Warning Event (Node and Pod), the status annotation and /prestop.
import t from 'tap';
import { formatRows, rowsOf } from '../../../../cli/l2-status.ts';
import { fakeContext, ManualClock } from '../../../../lab/fake/feature-context.ts';
import { ApiError } from '../../../../shared/kube/api-error.ts';
import type { KubeClient } from '../../../../shared/kube/client.ts';
import type { Node } from '../../../../shared/kube/types.ts';
import { parseL2State } from '../../../../shared/l2-state.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION, LABEL_OWNED_ANNOTATION } from '../../../../shared/names.ts';
import type { Feature } from '../../../../sidecar/feature.ts';
import { FEATURE_MODULES } from '../../../../sidecar/features.ts';
import { createFeature as createHandover } from '../../../../sidecar/l2/feature.ts';
import type { FenceSpec } from '../../../../sidecar/l2/fence.ts';
import { HANDOVER_OFF_REASON, L2HandoverOff } from '../../../../sidecar/l2/handover-off.ts';
import type { L2Host } from '../../../../sidecar/l2/host.ts';

const NODE = 'node-a';
const ENV = {
  DRAINGUARD_PROFILE: 'metallb-speaker',
  DRAINGUARD_FEATURES: 'l2-handover',
  DRAINGUARD_POD_NAME: 'speaker-a',
  DRAINGUARD_POD_NAMESPACE: 'metallb-system',
  DRAINGUARD_NODE_NAME: NODE,
};

/** The own Node behind GET and merge PATCH (labels and annotations; null deletes); every PATCH kept. */
function fakeApi(start: Node['metadata']) {
  let node: Node = { metadata: { name: NODE, resourceVersion: '1', ...start } };
  const patches: Record<string, string | null>[] = [];
  type Changes = Record<string, string | null> | undefined;
  const applied = (was: Record<string, string> | undefined, changes: Changes) =>
    Object.fromEntries(
      Object.entries({ ...was, ...changes }).filter((e): e is [string, string] => e[1] !== null),
    );
  const client = {
    get: async (path: string) => {
      if (path !== `/api/v1/nodes/${NODE}`) throw new ApiError('GET', path, 404, 'NotFound', path);
      return structuredClone(node);
    },
    patch: async (_path: string, body: { metadata: { labels?: Changes; annotations?: Changes } }) => {
      const { labels, annotations } = body.metadata;
      patches.push({ ...labels, ...annotations });
      const m = node.metadata ?? {};
      node = {
        metadata: {
          ...m,
          resourceVersion: `${Number(m.resourceVersion) + 1}`,
          labels: applied(m.labels, labels),
          annotations: applied(m.annotations, annotations),
        },
      };
      return structuredClone(node);
    },
  };
  return { client: client as unknown as KubeClient, patches, node: () => node };
}

/** A fence an earlier sidecar left, and every change asked for. */
class LeftFence implements Pick<L2Host, 'readFence' | 'applyFence'> {
  installed: FenceSpec | undefined = {
    vips4: ['192.0.2.10'],
    vips6: [],
    interfaces: ['eth0'],
    memberlistPorts: [],
  };
  applied: (FenceSpec | 'unfence')[] = [];
  async readFence() {
    return this.installed;
  }
  async applyFence(spec: FenceSpec | undefined) {
    this.applied.push(spec ?? 'unfence');
    this.installed = spec;
    return spec;
  }
}

t.test('the loader: the handover without the setting, the feature that runs none with it', async (t) => {
  const load = FEATURE_MODULES['l2-handover'];
  t.equal(await load?.({ speakerIgnoresExcludeLb: false }), createHandover);
  const off = await load?.({ speakerIgnoresExcludeLb: true });
  t.not(off, createHandover, 'with --ignore-exclude-lb the L2 handover is not what starts');
  const api = fakeApi({ labels: {}, annotations: {} });
  const { ctx } = fakeContext({
    env: { ...ENV, DRAINGUARD_SPEAKER_IGNORES_EXCLUDE_LB: 'true' },
    client: api.client,
    clock: new ManualClock(1_700_000_000_000),
  });
  t.equal(ctx.config.speakerIgnoresExcludeLb, true, 'the contract parses the variable');
  t.type(off?.(ctx), L2HandoverOff);
});

t.test(
  'with --ignore-exclude-lb: no label at a cordon; a left fence and label taken back; Event, status and /prestop say why',
  async (t) => {
    const api = fakeApi({
      labels: { [EXCLUDE_LABEL]: '' },
      annotations: { [LABEL_OWNED_ANNOTATION]: 'true' },
    });
    const { ctx, drain, events } = fakeContext({
      env: { ...ENV, DRAINGUARD_SPEAKER_IGNORES_EXCLUDE_LB: 'true' },
      client: api.client,
      clock: new ManualClock(1_700_000_000_000),
    });
    drain.readNode = api.node;
    const host = new LeftFence();
    const cap: Feature & { idle(): Promise<void> } = new L2HandoverOff(ctx, host);
    await cap.start();
    await cap.idle();
    t.strictSame(host.applied, ['unfence'], 'the fence an earlier sidecar left is removed');
    t.notOk(EXCLUDE_LABEL in (api.node().metadata?.labels ?? {}), 'the label it added is taken back');
    const status = parseL2State(api.node().metadata?.annotations?.[L2_STATE_ANNOTATION]);
    t.equal(status?.phase, 'idle');
    t.match(status?.disabled ?? '', /--ignore-exclude-lb/);
    t.match(
      formatRows(rowsOf([api.node()]), Date.now()),
      /node-a\s+no\s+none\s+idle \(handover off: --ignore-exclude-lb\)/,
      '`drainguard status` shows it',
    );
    t.strictSame(
      events.map((e) => [e.kind, e.type, e.reason]),
      [
        ['Node', 'Warning', HANDOVER_OFF_REASON],
        ['Pod', 'Warning', HANDOVER_OFF_REASON],
      ],
    );
    t.match(events[0]?.message ?? '', /--ignore-exclude-lb.*could never be confirmed/);

    // The drain: nothing labelled, nothing fenced, nothing written but what was already there.
    const patchesBefore = api.patches.length;
    drain.set({ draining: true, drainReason: 'cordoned' });
    await cap.idle();
    drain.set({ terminating: true });
    await cap.idle();
    t.equal(api.patches.length, patchesBefore, 'no PATCH at the drain');
    t.notOk(
      api.patches.some((p) => p[EXCLUDE_LABEL] === ''),
      'the exclude label is never set',
    );
    t.strictSame(host.applied, ['unfence'], 'no fence');
    t.strictSame(await cap.prestop(), {
      outcome: 'l2-handover-off',
      why: (await cap.prestop()).why,
    });
    t.match(String((await cap.prestop()).why), /--ignore-exclude-lb/);
    t.equal(events.length, 2, 'one Event per process');
    await cap.stop();
  },
);

t.test(
  'a bad DRAINGUARD_L2_INTERFACES at start (not through the webhook): the process starts, the L2 handover is off and the log, Event, status and /prestop name the variable and what is accepted',
  async (t) => {
    const env = { ...ENV, DRAINGUARD_L2_INTERFACES: 'eth0,a;b' };
    const load = FEATURE_MODULES['l2-handover'];
    const api = fakeApi({ labels: {}, annotations: {} });
    const logged: string[] = [];
    const { ctx, events } = fakeContext({
      env,
      client: api.client,
      clock: new ManualClock(1_700_000_000_000),
    });
    t.strictSame(ctx.config.l2Interfaces, ['eth0', 'a;b'], 'the contract does not refuse it: no crash loop');
    const factory = await load?.(ctx.config);
    t.not(factory, createHandover, 'not the handover');
    const log = ctx.log;
    const cap = factory?.({
      ...ctx,
      log: Object.assign(Object.create(log), {
        warn: (o: { why?: string }, m?: string) => logged.push(`${m ?? ''}: ${o.why ?? ''}`),
      }),
    }) as Feature & { idle(): Promise<void> };
    t.type(cap, L2HandoverOff);
    await cap.start();
    await cap.idle();
    const why =
      /DRAINGUARD_L2_INTERFACES \(pod annotation drainguard\.io\/l2-interfaces\) names "a;b": accepted are interface names of 1 to 15 characters: letters, digits, _ \. -, starting with a letter/;
    t.ok(
      logged.some((l) => why.test(l)),
      `logged: ${logged.join(' | ')}`,
    );
    t.match(events[0]?.message ?? '', why);
    t.equal(events[0]?.type, 'Warning');
    const status = parseL2State(api.node().metadata?.annotations?.[L2_STATE_ANNOTATION]);
    t.match(status?.disabled ?? '', why);
    t.match(
      formatRows(rowsOf([api.node()]), Date.now()),
      /node-a\s+no\s+none\s+idle \(handover off: bad DRAINGUARD_L2_INTERFACES\)/,
    );
    t.match(String((await cap.prestop()).why), why);
    await cap.stop();
  },
);
