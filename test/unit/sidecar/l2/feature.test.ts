// The L2 feature's edge with fakes for MetalLB's view, the candidates, the node and the API:
// what it writes (label, fence, Events, status annotation), in which order, and how it retries.
import t from 'tap';
import { fakeContext, ManualClock } from '../../../../lab/fake/feature-context.ts';
import { waitFor } from '../../../../shared/clock.ts';
import { ApiError } from '../../../../shared/kube/api-error.ts';
import type { KubeClient } from '../../../../shared/kube/client.ts';
import type { Node } from '../../../../shared/kube/types.ts';
import { type L2State, parseL2State, type ServiceVips } from '../../../../shared/l2-state.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION, LABEL_OWNED_ANNOTATION } from '../../../../shared/names.ts';
import type { CandidateView } from '../../../../sidecar/l2/candidate-view.ts';
import { L2Handover } from '../../../../sidecar/l2/feature.ts';
import type { FenceSpec } from '../../../../sidecar/l2/fence.ts';
import type { LinkPlan } from '../../../../sidecar/l2/fence-links.ts';
import { L2_EVENT_REASONS, type StatusSource } from '../../../../sidecar/l2/handover/index.ts';
import type { L2Host } from '../../../../sidecar/l2/host.ts';
import type { MetalLbObservation, MetalLbView } from '../../../../sidecar/l2/metallb-view.ts';

const T0 = 1_700_000_000_000;
const NODE = 'node-a';
const www: ServiceVips = { service: 'web/www', ips: ['192.0.2.10'] };

class FakeMetalLb implements MetalLbView {
  source: StatusSource = 'servicel2status';
  announced: ServiceVips[] = [www];
  /** service -> the node whose ServiceL2Status names it (written after the handover started). */
  owners: Record<string, string> = {};
  async checkCrd(): Promise<void> {}
  statusSource(): StatusSource {
    return this.source;
  }
  observe(
    _started: number | undefined,
    eligible: (s: string) => readonly string[] | undefined,
  ): MetalLbObservation {
    const newOwners = Object.fromEntries(
      Object.entries(this.owners).filter(([s, n]) => eligible(s)?.includes(n) ?? true),
    );
    return {
      statusSource: this.source,
      synced: true,
      announced: this.announced,
      newOwners,
      interfaces: Object.fromEntries(this.announced.map((s) => [s.service, this.interfaces])),
    };
  }
  /** What each own ServiceL2Status names (none: every interface, MetalLB's default). */
  interfaces: string[] = ['eth0'];
  async readAllServices(): Promise<void> {}
  async readStatusesConsistently(): Promise<void> {}
  retryUnreadServices(): void {}
  isLocal(): boolean {
    return false;
  }
  async stop(): Promise<void> {}
}

class FakeCandidates implements CandidateView {
  others: string[] | undefined = ['node-b', 'node-c'];
  perService: Record<string, string[]> | undefined;
  pools: string[] | undefined;
  reads = 0;
  poolReads = 0;
  /** Between a refresh and a release: the wide watches would be open. */
  watching = false;
  /** The last refresh's `waiting`. */
  waiting: boolean | undefined;
  /** Set: a refresh hangs until its signal aborts (lists on a path that drops packets). */
  hang = false;
  /** Refreshes abandoned through their signal. */
  abandoned = 0;
  async refresh(
    _fresh: boolean,
    _services: unknown,
    _isLocal: unknown,
    waiting?: boolean,
    signal?: AbortSignal,
  ): Promise<void> {
    this.reads++;
    this.watching = true;
    this.waiting = waiting;
    if (this.hang)
      await new Promise<void>((resolve) =>
        signal?.addEventListener(
          'abort',
          () => {
            this.abandoned++;
            resolve();
          },
          { once: true },
        ),
      );
  }
  async release(): Promise<void> {
    this.watching = false;
  }
  async readPools(): Promise<void> {
    this.poolReads++;
    this.pools = ['192.0.2.100-192.0.2.120'];
  }
}

class FakeHost implements L2Host {
  installed: FenceSpec | undefined;
  /** Every fence or unfence asked for, in order ('unfence' for a removal). */
  applied: (FenceSpec | 'unfence')[] = [];
  refuse = false;
  /** Set: nft's commit takes until it resolves. */
  hold: Promise<void> | undefined;
  async readFence(): Promise<FenceSpec | undefined> {
    return this.installed;
  }
  async applyFence(spec: FenceSpec | undefined): Promise<FenceSpec | undefined> {
    this.applied.push(spec ?? 'unfence');
    if (this.hold) await this.hold;
    if (this.refuse) throw new Error('Error: refused by test');
    this.installed = spec;
    return spec;
  }
  /** The node's links: named ones not among them are missing (the VIP route's link is eth0). */
  links = ['eth0'];
  /** The route targets of the last fenceLinks call (whatever is named, then fenced in any case). */
  targets: readonly string[] = [];
  /** The last fenceLinks call's plan. */
  plan: LinkPlan | undefined;
  async fenceLinks(plan: LinkPlan) {
    this.plan = plan;
    this.targets = [...new Set([...plan.targets, ...plan.always])];
    const present = plan.named.filter((n) => this.links.includes(n));
    const missing = plan.named.filter((n) => !this.links.includes(n));
    // Every route goes out of eth0 here.
    const routed = present.length === 0 || plan.always.length > 0 ? ['eth0'] : [];
    return { interfaces: [...new Set([...present, ...routed, ...plan.kept])], missing };
  }
  forgetRoutes(): void {}
  ownAddressReads = 0;
  async ownAddresses(): Promise<string[] | undefined> {
    this.ownAddressReads++;
    return ['192.0.2.1'];
  }
}

/** The own Node behind GET and merge PATCH; `down` fails every call as an unreachable API would. */
function fakeApi() {
  let node: Node = { metadata: { name: NODE, resourceVersion: '1', labels: {}, annotations: {} } };
  const api = {
    down: false,
    /** Set: a status annotation write hangs until it resolves (a stale API server holding it). */
    holdStatus: undefined as Promise<void> | undefined,
    patches: [] as string[],
    node: () => node,
    status: (): L2State | undefined => parseL2State(node.metadata?.annotations?.[L2_STATE_ANNOTATION]),
  };
  const unreachable = () => new ApiError('GET', '/', 503, 'ServiceUnavailable', 'down');
  const merge = (into: Record<string, string>, patch: Record<string, string | null> = {}) => {
    const out = { ...into };
    for (const [k, v] of Object.entries(patch)) {
      if (v === null) delete out[k];
      else out[k] = v;
    }
    return out;
  };
  const client = {
    async get(path: string) {
      if (api.down) throw unreachable();
      if (path === `/api/v1/nodes/${NODE}`) return structuredClone(node);
      throw new ApiError('GET', path, 404, 'NotFound', 'no such object');
    },
    async patch(
      _path: string,
      body: {
        metadata: { labels?: Record<string, string | null>; annotations?: Record<string, string | null> };
      },
    ) {
      if (api.down) throw unreachable();
      if (api.holdStatus && L2_STATE_ANNOTATION in (body.metadata.annotations ?? {})) await api.holdStatus;
      api.patches.push(Object.keys({ ...body.metadata.labels, ...body.metadata.annotations }).join(','));
      const m = node.metadata ?? {};
      node = {
        metadata: {
          ...m,
          resourceVersion: String(Number(m.resourceVersion) + 1),
          labels: merge(m.labels ?? {}, body.metadata.labels),
          annotations: merge(m.annotations ?? {}, body.metadata.annotations),
        },
      };
      return structuredClone(node);
    },
  };
  return { api, client: client as unknown as KubeClient };
}

async function started(env: Record<string, string> = {}) {
  const clock = new ManualClock(T0);
  const { api, client } = fakeApi();
  const {
    ctx,
    drain,
    api: health,
    events,
    metrics,
  } = fakeContext({
    env: {
      DRAINGUARD_PROFILE: 'metallb-speaker',
      DRAINGUARD_FEATURES: 'l2-handover',
      DRAINGUARD_POD_NAME: 'speaker-a',
      DRAINGUARD_POD_NAMESPACE: 'metallb-system',
      DRAINGUARD_NODE_NAME: NODE,
      ...env,
    },
    client,
    clock,
  });
  drain.readNode = api.node;
  const metallb = new FakeMetalLb();
  const candidates = new FakeCandidates();
  const host = new FakeHost();
  const cap = new L2Handover(ctx, () => ({ metallb, candidates, host }));
  await cap.start();
  await cap.idle();
  /** One reconcile, as a tick or a watch event would ask for. */
  const pass = async () => {
    cap.trigger('test');
    await cap.idle();
  };
  const reasons = (kind = 'Node') => events.filter((e) => e.kind === kind).map((e) => e.reason);
  /** A new process on the same node: same API, MetalLB, candidates and nft. */
  const restarted = async () => {
    const next = new L2Handover(ctx, () => ({ metallb, candidates, host }));
    await next.start();
    await next.idle();
    return next;
  };
  return {
    cap,
    clock,
    api,
    health,
    drain,
    events,
    reasons,
    metrics,
    metallb,
    candidates,
    host,
    pass,
    restarted,
  };
}

t.test(
  'cordon: label, then confirmation, then fence; Events on Node and Pod; status on the Node',
  async (t) => {
    const w = await started();
    t.teardown(() => w.cap.stop());
    t.equal(w.api.status(), undefined, 'an idle node gets no annotation');
    w.drain.set({ draining: true, drainReason: 'cordoned' });
    await w.cap.idle();
    t.equal(w.api.node().metadata?.labels?.[EXCLUDE_LABEL], '');
    t.equal(w.api.node().metadata?.annotations?.[LABEL_OWNED_ANNOTATION], 'true');
    t.strictSame(w.reasons('Node'), [L2_EVENT_REASONS.started]);
    t.strictSame(w.reasons('Pod'), [L2_EVENT_REASONS.started]);
    t.equal(w.api.status()?.phase, 'labelled');
    t.ok(w.candidates.reads > 0, 'candidates read when the handover starts');

    w.clock.advance(200);
    await w.pass();
    t.equal(w.api.status()?.phase, 'awaiting-confirmation');
    const watch = { vips4: [], vips6: [], interfaces: ['eth0'], memberlistPorts: [], held: ['192.0.2.10'] };
    t.strictSame(w.host.applied, [watch], 'before a confirmation only the claim watch: nothing dropped');
    t.ok(w.candidates.watching, 'the candidates are watched until the fence');

    // A ServiceL2Status naming a node that may not announce the service confirms nothing.
    w.candidates.perService = { 'web/www': ['node-c'] };
    w.metallb.owners = { 'web/www': 'node-b' };
    await w.pass();
    t.strictSame(w.host.applied, [watch]);

    w.metallb.owners = { 'web/www': 'node-c' };
    w.clock.advance(300);
    await w.pass();
    t.strictSame(w.host.applied, [
      watch,
      { vips4: ['192.0.2.10'], vips6: [], interfaces: ['eth0'], memberlistPorts: [] },
    ]);
    t.strictSame(w.reasons(), [L2_EVENT_REASONS.started, L2_EVENT_REASONS.done]);
    t.match(w.events.at(-1)?.message, /VIP 192\.0\.2\.10 handed to node-c in 0\.5 s/);
    t.match(w.api.status(), { phase: 'fenced', fenced: true, handedTo: { 'web/www': 'node-c' } });
    t.match(w.metrics.render(), /drainguard_l2_phase\{phase="fenced"\} 1/);
    t.notOk(w.candidates.watching, 'fenced: the candidates are not watched any more');

    // Steady state: nothing written again.
    const patches = w.api.patches.length;
    await w.pass();
    await w.pass();
    t.equal(w.api.patches.length, patches);
    t.equal(w.host.applied.length, 2);

    // Uncordon: fence off first, then the label, then idle.
    w.drain.set({ draining: false, drainReason: undefined });
    await w.cap.idle();
    t.strictSame(w.host.applied.at(-1), 'unfence');
    t.equal(w.api.node().metadata?.labels?.[EXCLUDE_LABEL], '', 'label still on while the fence comes off');
    await w.pass();
    t.equal(w.api.node().metadata?.labels?.[EXCLUDE_LABEL], undefined);
    await w.pass();
    t.equal(w.api.status()?.phase, 'idle');
    t.equal(w.reasons().at(-1), L2_EVENT_REASONS.undone);
  },
);

t.test(
  'a status annotation write that hangs (a stale API server) holds no decision: confirmed and fenced meanwhile, the latest status written once it answers',
  async (t) => {
    const w = await started();
    t.teardown(() => w.cap.stop());
    let answer = () => {};
    w.api.holdStatus = new Promise<void>((r) => {
      answer = r;
    });
    w.drain.set({ draining: true, drainReason: 'cordoned' });
    await waitFor('labelled', () => w.api.node().metadata?.labels?.[EXCLUDE_LABEL] === '', {
      timeoutMs: 2_000,
    });
    w.clock.advance(200);
    w.cap.trigger('test');
    await waitFor('awaiting confirmation', () => w.cap.state.phase === 'awaiting-confirmation', {
      timeoutMs: 2_000,
    });
    w.metallb.owners = { 'web/www': 'node-c' };
    w.clock.advance(300);
    w.cap.trigger('test');
    // Before: the first reconcile awaited its status write, and no reconcile ran after it.
    await waitFor('fenced while the status write hangs', () => w.host.applied.length === 1, {
      timeoutMs: 2_000,
    });
    t.equal(w.api.status(), undefined, 'nothing written yet');
    answer();
    await w.cap.idle();
    t.match(w.api.status(), { phase: 'fenced', handedTo: { 'web/www': 'node-c' } }, 'the latest status wins');
  },
);

t.test(
  '/prestop answers once the fence is installed, not when the handover is decided (CI: an empty ruleset after the hook answered)',
  async (t) => {
    const w = await started();
    t.teardown(() => w.cap.stop());
    w.drain.set({ draining: true, drainReason: 'cordoned' });
    await w.cap.idle();
    w.clock.advance(200);
    await w.pass();
    t.equal(w.cap.state.phase, 'awaiting-confirmation');
    let commit = () => {};
    w.host.hold = new Promise<void>((r) => {
      commit = r;
    });
    w.metallb.owners = { 'web/www': 'node-c' };
    w.clock.advance(300);
    w.cap.trigger('test');
    await waitFor('the fence committing', () => w.host.applied.length === 2, { timeoutMs: 2_000 });
    t.equal(w.cap.state.phase, 'fenced-confirmed', 'decided: fenced');
    t.equal(w.host.installed?.vips4.length ?? 0, 0, 'not installed yet');
    // Before: the hook saw the decided phase and answered "handed-over" with nothing dropped.
    const answered = w.cap.prestop().then((summary) => ({ summary, installed: w.host.installed }));
    // Turns of the event loop (no time passes): the hook's first looks while nft commits.
    for (let i = 0; i < 5; i++) await new Promise(setImmediate);
    commit();
    const { summary, installed } = await answered;
    t.equal(summary.outcome, 'handed-over');
    t.strictSame(installed?.vips4, ['192.0.2.10'], 'the fence was installed when the hook answered');
  },
);

t.test('/prestop says budget-spent while a decided fence cannot be installed', async (t) => {
  const w = await started({ DRAINGUARD_HANDOVER_BUDGET_SECONDS: '2' });
  t.teardown(() => w.cap.stop());
  w.drain.set({ draining: true, drainReason: 'cordoned' });
  await w.cap.idle();
  w.clock.advance(200);
  await w.pass();
  w.host.refuse = true;
  w.metallb.owners = { 'web/www': 'node-c' };
  w.clock.advance(300);
  await w.pass();
  t.equal(w.cap.state.phase, 'fenced-confirmed');
  const answered = w.cap.prestop();
  await w.cap.idle();
  // The budget passes on the feature's clock (the manual clock's sleeps end only when aborted):
  // stop() aborts it, as the pod's end would.
  await w.cap.stop();
  t.equal((await answered).outcome, 'budget-spent', 'never "handed-over" with nothing dropped');
});

t.test('a fence nft refuses is retried with a growing backoff, not on every reconcile', async (t) => {
  const w = await started();
  t.teardown(() => w.cap.stop());
  w.host.refuse = true;
  w.metallb.owners = {};
  w.drain.set({ draining: true });
  await w.cap.idle();
  w.metallb.owners = { 'web/www': 'node-b' };
  w.clock.advance(1);
  await w.pass();
  await w.pass();
  t.equal(w.host.applied.length, 1, 'first attempt');
  // Asked again and again (ticks every 100 ms, watch events): no new attempt before the backoff.
  for (let i = 0; i < 10; i++) await w.pass();
  w.clock.advance(90);
  await w.pass();
  t.equal(w.host.applied.length, 1, 'the first wait is 100–200 ms');
  w.clock.advance(120);
  await w.pass();
  t.equal(w.host.applied.length, 2, 'second attempt after the first wait');
  w.clock.advance(190);
  await w.pass();
  t.equal(w.host.applied.length, 2, 'the second wait is 200–400 ms');
  w.clock.advance(220);
  w.host.refuse = false;
  await w.pass();
  t.equal(w.host.applied.length, 3);
  t.ok(w.host.installed, 'installed once nft accepts it');
  t.match(w.metrics.render(), /drainguard_l2_actions_total\{action="fence",outcome="error"\} 2/);
  t.equal(w.reasons().filter((r) => r === L2_EVENT_REASONS.done).length, 1, 'the Event once');
});

t.test(
  'the fail-safe fires at its grace though the reconcile still awaits the candidates (a path that drops packets)',
  async (t) => {
    // Robustness seed 111 trial 128: the drain's first reconcile waited on lists that could only
    // time out, and the fail-safe was decided seconds after its grace, once they had.
    const w = await started();
    t.teardown(() => w.cap.stop());
    w.candidates.others = undefined;
    w.candidates.hang = true;
    w.drain.set({ draining: true });
    await waitFor('the handover reading its candidates', () => w.candidates.reads > 0, { timeoutMs: 2_000 });
    w.api.down = true;
    w.health.result(false);
    w.clock.advance(4_900);
    w.cap.trigger('tick');
    t.equal(w.candidates.abandoned, 0, 'before the grace the reads go on');
    w.clock.advance(100);
    w.cap.trigger('tick');
    await waitFor('the fail-safe fence', () => w.host.installed, { timeoutMs: 2_000 });
    t.match(w.host.installed, { memberlistPorts: [7946] }, 'fail-safe fence with the memberlist cut');
    t.equal(w.candidates.abandoned, 1, 'the waiting reads abandoned');
    await w.cap.idle();
    t.equal(w.cap.state.phase, 'failsafe-fenced');
  },
);

t.test('Events while the API is down are kept and written once it answers', async (t) => {
  const w = await started();
  t.teardown(() => w.cap.stop());
  // The API went away a minute ago (past the fail-safe grace) and the node is cordoned.
  w.api.down = true;
  w.candidates.others = undefined;
  w.health.result(false, T0 - 60_000);
  w.drain.set({ draining: true });
  await w.cap.idle();
  t.match(
    w.host.installed,
    { memberlistPorts: [7946], pools: ['192.0.2.100-192.0.2.120'] },
    'fail-safe fence over the pools read at start',
  );
  t.strictSame(w.events, [], 'nothing written while the API is down');
  t.equal(w.api.status(), undefined);

  w.api.down = false;
  w.health.result(true);
  await w.cap.idle();
  t.strictSame(w.reasons('Node'), [L2_EVENT_REASONS.failsafeFence]);
  t.strictSame(w.reasons('Pod'), [L2_EVENT_REASONS.failsafeFence]);
  t.match(w.api.status(), { phase: 'failsafe-fenced', failsafe: true });
});

t.test(
  "a fail-safe with no VIP known here looks up the links that reach MetalLB's pools, not only the default route's",
  async (t) => {
    // A sidecar whose ServiceL2Status view is empty (started or relisting while the API went
    // away): the pools' links are where a speaker cut off from memberlist would answer ARP, and a
    // node may have no default route, or one on another link than the VIPs' subnet.
    const w = await started();
    t.teardown(() => w.cap.stop());
    w.metallb.announced = [];
    w.api.down = true;
    w.candidates.others = undefined;
    w.health.result(false, T0 - 60_000);
    await w.cap.idle(); // one pass: API down, not draining (nothing to do)
    w.drain.set({ draining: true });
    await w.cap.idle();
    t.match(w.host.installed, { pools: ['192.0.2.100-192.0.2.120'] }, 'the fail-safe fence is on');
    t.strictSame(
      [...w.host.targets],
      ['192.0.2.100', 'default'],
      "the pool's first address, then the default route",
    );
  },
);

t.test(
  "a fail-safe with the own ServiceL2Status naming eth1: the pools' and the default route's links are fenced besides (issue 42, item 2)",
  async (t) => {
    // Before: a named link that existed was all the fence went on, though a speaker cut off from
    // memberlist announces every pool VIP on every interface its advertisements allow.
    const w = await started();
    t.teardown(() => w.cap.stop());
    w.host.links = ['eth0', 'eth1'];
    w.metallb.interfaces = ['eth1'];
    w.api.down = true;
    w.candidates.others = undefined;
    w.health.result(false, T0 - 60_000);
    await w.cap.idle(); // one pass: API down, not draining (nothing to do)
    w.drain.set({ draining: true });
    await w.cap.idle();
    t.match(w.host.plan, { named: ['eth1'], targets: ['192.0.2.10'], always: ['192.0.2.100', 'default'] });
    t.strictSame(w.host.installed?.interfaces, ['eth0', 'eth1'], "the routes' link and the named one");
  },
);

t.test('no other node: refused, published as idle with stranded, said once', async (t) => {
  const w = await started();
  t.teardown(() => w.cap.stop());
  w.candidates.others = [];
  w.drain.set({ draining: true });
  await w.cap.idle();
  await w.pass();
  t.strictSame(w.reasons(), [L2_EVENT_REASONS.impossible]);
  t.equal(w.api.node().metadata?.labels?.[EXCLUDE_LABEL], undefined, 'not labelled');
  t.match(w.api.status(), { phase: 'idle', stranded: true });
  t.match(w.metrics.render(), /drainguard_l2_handover_impossible 1/);
  t.ok(w.candidates.watching, 'refused: still watched (a node that becomes eligible is seen)');
  t.equal(w.candidates.waiting, true, 'as a refused handover waiting for a change');
  const outcome = await w.cap.prestop();
  t.equal(outcome.outcome, 'no-other-node');
});

t.test('given up while the drain lasts: the candidates are not read or watched any more', async (t) => {
  const w = await started();
  t.teardown(() => w.cap.stop());
  w.drain.set({ draining: true, drainReason: 'cordoned' });
  await w.cap.idle();
  await w.pass();
  t.ok(w.candidates.watching);
  // Nobody confirms within the budget.
  w.clock.advance(31_000);
  await w.pass();
  t.match(w.api.status(), { phase: 'idle', gaveUp: true });
  t.notOk(w.candidates.watching, 'given up: the watches stop');
  const reads = w.candidates.reads;
  w.clock.advance(10_000);
  await w.pass();
  await w.pass();
  t.equal(w.candidates.reads, reads, 'and nothing is read while given up');
});

t.test('restart: resumes from the annotation and the installed fence without a second fence', async (t) => {
  const w = await started();
  w.drain.set({ draining: true });
  await w.cap.idle();
  w.metallb.owners = { 'web/www': 'node-b' };
  await w.pass();
  await w.pass();
  t.equal(w.api.status()?.phase, 'fenced');
  await w.cap.stop();

  const applied = w.host.applied.length;
  const again = await w.restarted();
  t.teardown(() => again.stop());
  t.equal(again.state.phase, 'fenced-confirmed');
  t.equal(w.host.applied.length, applied, 'the fence read back, not installed again');
});

t.test(
  'issue 22 defect 5: a named interface missing on this node is not fenced, named in a Warning Event and in status',
  async (t) => {
    const w = await started({ DRAINGUARD_L2_INTERFACES: 'eth0,ens9' });
    t.teardown(() => w.cap.stop());
    w.metallb.owners = {};
    w.drain.set({ draining: true, drainReason: 'cordoned' });
    await w.cap.idle();
    w.metallb.owners = { 'web/www': 'node-b' };
    w.clock.advance(300);
    await w.pass();
    await w.pass();
    t.strictSame(w.host.applied.at(-1), {
      vips4: ['192.0.2.10'],
      vips6: [],
      interfaces: ['eth0'],
      memberlistPorts: [],
    });
    t.ok(
      w.host.applied.every((f) => f !== 'unfence' && f.interfaces.join() === 'eth0'),
      'neither the claim watch nor the fence on the missing interface',
    );
    const missing = w.events.filter(
      (e) => e.kind === 'Node' && e.reason === L2_EVENT_REASONS.interfacesMissing,
    );
    t.equal(missing.length, 1, 'one Warning Event');
    t.equal(missing[0]?.type, 'Warning');
    t.match(missing[0]?.message, /ens9 named by drainguard\.io\/l2-interfaces not on node node-a/);
    t.match(missing[0]?.message, /the fence goes on eth0/);
    const done = w.events.find((e) => e.reason === L2_EVENT_REASONS.done)?.message ?? '';
    t.match(done, /fence installed on eth0$/);
    t.notMatch(done, /ens9/, 'never "installed" on a device that is not there');
    t.match(w.api.status(), { phase: 'fenced', interfaces: ['eth0'], missingInterfaces: ['ens9'] });
    t.match(await w.cap.prestop(), { phase: 'fenced', missingInterfaces: ['ens9'] }, '/prestop names it too');

    // Uncordon: the fence and the complaint go (/prestop's extra pass is still queued).
    w.drain.set({ draining: false, drainReason: undefined });
    for (let i = 0; i < 5; i++) await w.pass();
    t.equal(w.api.status()?.phase, 'idle');
    t.equal(w.api.status()?.missingInterfaces, undefined);
  },
);

t.test(
  "fail-safe with MetalLB's pools read at start: only the pools are dropped; API back, decided again, the fail-safe fence and cut kept until the drain ends",
  async (t) => {
    const w = await started();
    t.teardown(() => w.cap.stop());
    t.ok(w.candidates.poolReads > 0, 'the pools are read at start');
    w.api.down = true;
    w.candidates.others = undefined;
    w.health.result(false, T0 - 60_000);
    await w.cap.idle(); // one pass: API down, not draining (nothing to do)
    w.drain.set({ draining: true });
    await w.cap.idle();
    t.match(w.host.installed, { memberlistPorts: [7946], pools: ['192.0.2.100-192.0.2.120'] });
    t.equal(w.host.installed?.ownAddresses, undefined, 'not the broad drop');
    t.equal(w.host.ownAddressReads, 0, "the node's addresses are not needed");

    // The API is back; the peers re-elected during the cut (node-b's status is there).
    w.api.down = false;
    w.candidates.others = ['node-b', 'node-c'];
    w.metallb.owners = { 'web/www': 'node-b' };
    w.health.result(true);
    await w.cap.idle();
    t.equal(w.api.node().metadata?.labels?.[EXCLUDE_LABEL], '', 'labelled again, from scratch');
    await w.pass();
    // Confirmed, but the fail-safe fence and its cut stay until the drain ends (handover/phases.ts).
    t.match(w.api.status(), {
      phase: 'fenced',
      memberlistCut: true,
      failsafeDrop: 'pools',
      failsafeKept: /until the drain ends/,
    });
    w.clock.advance(60_000);
    await w.pass();
    t.match(w.host.installed, { memberlistPorts: [7946], pools: ['192.0.2.100-192.0.2.120'] });
    t.ok(w.reasons().includes(L2_EVENT_REASONS.confirmed));
  },
);

t.test(
  'issue 42 item 6: a malformed status annotation is ignored, with a Warning Event naming what is wrong; the handover runs',
  async (t) => {
    const labelled: L2State = {
      phase: 'labelled',
      since: new Date(T0).toISOString(),
      vips: ['192.0.2.10'],
      services: [www],
      handedTo: {},
      fenced: false,
      failsafe: false,
      interfaces: [],
    };
    const cases: [string, unknown, RegExp][] = [
      [
        'a service without ips',
        { ...labelled, services: [{ service: 'web/www' }] },
        /services\[0\]\.ips: missing/,
      ],
      ['services not an array', { ...labelled, services: 'web/www' }, /services: not an array/],
    ];
    for (const [name, broken, problem] of cases)
      await t.test(name, async (t) => {
        const w = await started();
        await w.cap.stop();
        // A restart mid-drain finds it.
        const annotations = w.api.node().metadata?.annotations ?? {};
        annotations[L2_STATE_ANNOTATION] = JSON.stringify(broken);
        w.drain.set({ draining: true, drainReason: 'cordoned' });
        const again = await w.restarted();
        t.teardown(() => again.stop());
        const invalid = w.events.filter((e) => e.reason === L2_EVENT_REASONS.stateInvalid);
        t.equal(invalid.length, 2, 'on the Node and the Pod');
        t.equal(invalid[0]?.type, 'Warning');
        t.match(invalid[0]?.message, problem);
        t.match(invalid[0]?.message, /ignored/);
        t.equal(w.api.node().metadata?.labels?.[EXCLUDE_LABEL], '', 'labelled all the same');
        w.clock.advance(200);
        again.trigger('test');
        await again.idle();
        t.equal(again.state.phase, 'awaiting-confirmation');
        w.metallb.owners = { 'web/www': 'node-b' };
        w.clock.advance(300);
        again.trigger('test');
        await again.idle();
        t.equal(again.state.phase, 'fenced-confirmed', 'handed over and fenced');
        t.match(w.api.status(), { phase: 'fenced', services: [www] }, 'a valid annotation written over it');
      });
  },
);

t.test(
  'issue 42 item 5: fenced, an exclude label removed from the Node is put back as soon as the watch shows it, with a Warning Event',
  async (t) => {
    const w = await started();
    t.teardown(() => w.cap.stop());
    w.drain.set({ draining: true, drainReason: 'cordoned' });
    await w.cap.idle();
    w.metallb.owners = { 'web/www': 'node-b' };
    w.clock.advance(300);
    await w.pass();
    await w.pass();
    t.equal(w.cap.state.phase, 'fenced-confirmed');
    // A tool removes the label (and the annotation saying drainguard added it).
    const meta = w.api.node().metadata ?? {};
    delete meta.labels?.[EXCLUDE_LABEL];
    delete meta.annotations?.[LABEL_OWNED_ANNOTATION];
    meta.resourceVersion = String(Number(meta.resourceVersion) + 1);
    w.drain.nodeChanged();
    await w.cap.idle();
    t.equal(w.api.node().metadata?.labels?.[EXCLUDE_LABEL], '', 'put back without waiting for a tick');
    t.equal(w.api.node().metadata?.annotations?.[LABEL_OWNED_ANNOTATION], 'true', "as drainguard's");
    const removed = w.events.filter((e) => e.reason === L2_EVENT_REASONS.labelRemoved);
    t.strictSame(
      removed.map((e) => [e.kind, e.type]),
      [
        ['Node', 'Warning'],
        ['Pod', 'Warning'],
      ],
    );
    t.match(removed[0]?.message, /removed from node node-a under the fence/);
    w.drain.nodeChanged();
    await w.cap.idle();
    t.strictSame(
      w.reasons().filter((r) => r === L2_EVENT_REASONS.labelRestored),
      [L2_EVENT_REASONS.labelRestored],
    );
    t.equal(w.cap.state.phase, 'fenced-confirmed', 'the fence stays');
    t.strictSame(w.host.applied.at(-1), {
      vips4: ['192.0.2.10'],
      vips6: [],
      interfaces: ['eth0'],
      memberlistPorts: [],
    });
  },
);
