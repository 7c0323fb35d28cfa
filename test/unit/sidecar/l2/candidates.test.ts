// Who else could announce (candidates.ts) against a scripted API: every Node and speaker pod is
// listed once per handover, in pages, then watched; the narrow reads (MetalLB's config, the Local
// services' EndpointSlices) are throttled and back off; a view that cannot be read is not known.
import t, { type Test } from 'tap';
import { fakeContext, ManualClock, steppingClock } from '../../../../lab/fake/feature-context.ts';
import { VirtualClock } from '../../../../lab/fake/virtual-clock.ts';
import type { Clock } from '../../../../shared/clock.ts';
import { waitFor } from '../../../../shared/clock.ts';
import { ApiError } from '../../../../shared/kube/api-error.ts';
import type { KubeClient } from '../../../../shared/kube/client.ts';
import type { WatchOptions } from '../../../../shared/kube/request.ts';
import type { KubeObject, Node, Pod } from '../../../../shared/kube/types.ts';
import { CandidateReader } from '../../../../sidecar/l2/candidates.ts';
import { WIDE_PAGE_SIZE } from '../../../../sidecar/l2/read-bounds.ts';

const T0 = 1_700_000_000_000;
const ready = [{ type: 'Ready', status: 'True' }];
const node = (name: string, rv = '1'): Node => ({
  metadata: { name, labels: {}, resourceVersion: rv, annotations: { big: 'x'.repeat(1_000) } },
  spec: {},
  status: { conditions: ready, images: [{ names: ['registry.example.com/app:1'] }] } as Node['status'],
});
const speaker = (n: string): Pod => ({
  metadata: {
    name: `speaker-${n}`,
    namespace: 'metallb-system',
    resourceVersion: '1',
    ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'speaker', uid: 'ds' }],
  },
  spec: { nodeName: n },
  status: { conditions: ready },
});

/** A body as the client hands it over: streamed in small chunks when asked to (onText). */
function streamed(text: string, opts: { onText?: (chunk: string) => void }): string | undefined {
  if (!opts.onText) return text;
  for (let i = 0; i < text.length; i += 97) opts.onText(text.slice(i, i + 97));
  return undefined;
}

type Emit = (ev: { type: string; object: KubeObject }) => void;

/**
 * The API of the reads: `nodes` Nodes and a speaker on each, paged as the API server pages
 * (limit/continue), watches that stay open (`emit` sends them events, `fail` ends them with an
 * error), no MetalLB config, EndpointSlices in v1beta1 only. `calls` records every request.
 */
function wideApi(names: string[]) {
  const api = {
    nodes: names.map((n) => node(n)),
    pods: names.map(speaker),
    /** Paths answered 403 (a grant missing). */
    forbidden: new Set<string>(),
    /** Paths answered 503 (an API server waiting out an etcd election). */
    unavailable: new Set<string>(),
    /** Paths answered 429 (API Priority and Fairness). */
    throttled: new Set<string>(),
    /** While set, the pages after the first wait for it. */
    held: undefined as Promise<void> | undefined,
    /** The Local service's ready endpoints are also on these nodes. */
    readyAlsoOn: [] as string[],
    down: false,
    calls: [] as string[],
    watches: new Map<string, { emit: Emit; fail: (e: Error) => void }>(),
  };
  /** As served: the text of one page (the wide lists are read as text and parsed item by item). */
  const page = (items: KubeObject[], query: Record<string, unknown>) => {
    const from = Number(query.continue ?? 0);
    const limit = Number(query.limit ?? items.length) || items.length;
    const next = from + limit < items.length ? String(from + limit) : undefined;
    return JSON.stringify({
      kind: 'List',
      metadata: { resourceVersion: '10', continue: next },
      items: items.slice(from, from + limit),
    });
  };
  const client = {
    async get(path: string, opts: { query?: Record<string, unknown>; onText?: (c: string) => void } = {}) {
      const base = path.split('?')[0] as string;
      const q = opts.query ?? {};
      api.calls.push(
        `LIST ${base}${q.limit === undefined ? '' : ` limit=${q.limit}`}${q.continue ? ` continue=${q.continue}` : ''}${q.resourceVersion === undefined ? '' : ` resourceVersion=${q.resourceVersion}`}`,
      );
      if (api.down) throw new ApiError('GET', path, 503, 'ServiceUnavailable', 'down');
      if (api.forbidden.has(base)) throw new ApiError('GET', path, 403, 'Forbidden', 'nodes is forbidden');
      if (api.unavailable.has(base)) throw new ApiError('GET', path, 503, 'ServiceUnavailable', 'election');
      if (api.throttled.has(base)) throw new ApiError('GET', path, 429, 'TooManyRequests', 'throttled');
      if (q.continue && api.held) await api.held;
      if (base === '/api/v1/nodes') return streamed(page(api.nodes, q), opts);
      if (base === '/api/v1/namespaces/metallb-system/pods') return streamed(page(api.pods, q), opts);
      if (base.startsWith('/apis/discovery.k8s.io/v1beta1/'))
        return {
          items: [
            {
              endpoints: [
                { topology: { 'kubernetes.io/hostname': 'node-a' }, conditions: { ready: true } },
                { topology: { 'kubernetes.io/hostname': 'node-c' }, conditions: { ready: true } },
                ...api.readyAlsoOn.map((n) => ({
                  topology: { 'kubernetes.io/hostname': n },
                  conditions: { ready: true },
                })),
                { topology: { 'kubernetes.io/hostname': 'node-b' }, conditions: { ready: false } },
              ],
            },
          ],
        };
      throw new ApiError('GET', path, 404, 'NotFound', 'no such resource');
    },
    async watch(
      path: string,
      query: Record<string, unknown>,
      onEvent: Emit,
      signal: AbortSignal,
      opts: WatchOptions = {},
    ) {
      api.calls.push(`WATCH ${path} from ${query.resourceVersion}`);
      if (api.down) throw new ApiError('WATCH', path, 503, 'ServiceUnavailable', 'down');
      opts.onOpen?.();
      try {
        await new Promise<void>((resolve, reject) => {
          api.watches.set(path, { emit: onEvent, fail: reject });
          signal.addEventListener('abort', () => resolve(), { once: true });
        });
      } finally {
        api.watches.delete(path);
      }
    },
  };
  const lists = (path = '/api/v1/nodes') =>
    api.calls.filter((c) => c.startsWith(`LIST ${path} `) || c === `LIST ${path}`).length;
  /** Whole lists (their first page). */
  const wholeLists = (path = '/api/v1/nodes') =>
    api.calls.filter((c) => c.startsWith(`LIST ${path} `) && !c.includes('continue=')).length;
  return { api, client: client as unknown as KubeClient, lists, wholeLists };
}

function reader(names = ['node-a', 'node-b', 'node-c'], time: Clock = new ManualClock(T0)) {
  const clock = time as ManualClock;
  const wide = wideApi(names);
  const { ctx, drain } = fakeContext({
    env: {
      DRAINGUARD_PROFILE: 'metallb-speaker',
      DRAINGUARD_FEATURES: 'l2-handover',
      DRAINGUARD_POD_NAME: 'speaker-node-a',
      DRAINGUARD_POD_NAMESPACE: 'metallb-system',
      DRAINGUARD_NODE_NAME: 'node-a',
    },
    client: wide.client,
    clock,
  });
  drain.pod = {
    metadata: {
      name: 'speaker-node-a',
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'speaker', uid: 'ds', controller: true },
      ],
    },
  };
  /** The reconciles the reader asked for (knowable), by reason. */
  const asked: string[] = [];
  const candidates = new CandidateReader(ctx, (reason) => asked.push(reason));
  return { candidates, clock, asked, ...wide };
}

const www = { service: 'web/www', ips: ['192.0.2.10'] };
const local = { service: 'web/local', ips: ['192.0.2.20'] };
const isLocal = (s: string) => s === 'web/local';

t.test('candidates: other speakers, and per Local service only nodes with a ready endpoint', async (t) => {
  const { candidates, api } = reader();
  t.teardown(() => candidates.release());
  await candidates.refresh(true, [www, local], isLocal);
  t.strictSame(candidates.others, ['node-b', 'node-c']);
  t.strictSame(candidates.perService, { 'web/www': ['node-b', 'node-c'], 'web/local': ['node-c'] });
  // discovery.k8s.io/v1 is not served (Kubernetes < 1.21): v1beta1 from then on.
  const slices = (v: string) => api.calls.filter((c) => c.includes(`/apis/discovery.k8s.io/${v}/`)).length;
  t.equal(slices('v1'), 1);
  await candidates.release();
  // Released, nothing is known: a handover wanted after the release (a preStop arriving during
  // the reconcile that released it) must not act on the last handover's view. Before: kept.
  t.equal(candidates.others, undefined, 'released: not known');
  t.equal(candidates.perService, undefined);
  await candidates.refresh(true, [www, local], isLocal);
  t.equal(slices('v1'), 1);
  t.equal(slices('v1beta1'), 2);
});

t.test(
  'a handover lists every Node and speaker pod ONCE, in pages, then watches them: no re-list every 2 s',
  async (t) => {
    const names = Array.from(
      { length: 2 * WIDE_PAGE_SIZE + 10 },
      (_, i) => `node-${String(i).padStart(4, '0')}`,
    );
    names[0] = 'node-a';
    const { candidates, api, clock, lists, wholeLists } = reader(names);
    t.teardown(() => candidates.release());
    await candidates.refresh(true, [www], isLocal);
    t.equal(candidates.others?.length, names.length - 1);
    t.equal(lists(), 3, 'three pages of Nodes');
    t.ok(
      api.calls.includes(`LIST /api/v1/nodes limit=${WIDE_PAGE_SIZE} continue=${WIDE_PAGE_SIZE}`),
      'paged with limit and continue',
    );
    t.notOk(
      api.calls.some((c) => c.includes('resourceVersion=0')),
      'no resourceVersion=0 (a 1.20 API server ignores limit with it)',
    );
    await waitFor('both watches open', () => api.watches.size === 2, { timeoutMs: 2_000 });
    t.ok(api.calls.includes('WATCH /api/v1/nodes from 10'), "watched from the list's resourceVersion");

    // 40 s of a handover under way, a reconcile every second or so.
    for (let i = 0; i < 40; i++) {
      clock.advance(1_000);
      await candidates.refresh(false, [www], isLocal);
    }
    t.equal(wholeLists('/api/v1/nodes'), 1, 'Nodes listed once per handover');
    t.equal(wholeLists('/api/v1/namespaces/metallb-system/pods'), 1, 'speaker pods listed once per handover');

    // A change arrives through the watch.
    const b = node('node-0001', '11');
    b.spec = { unschedulable: true };
    api.watches.get('/api/v1/nodes')?.emit({ type: 'MODIFIED', object: b });
    await candidates.refresh(false, [www], isLocal);
    t.notOk(candidates.others?.includes('node-0001'), 'a node cordoned meanwhile is no candidate');
    t.equal(candidates.others?.length, names.length - 2);
    t.equal(wholeLists(), 1, 'seen without a list');

    // The handover ends: the watches stop; the next one lists again, once.
    await candidates.release();
    t.equal(api.watches.size, 0, 'no watch left open');
    await candidates.refresh(true, [www], isLocal);
    t.equal(wholeLists(), 2);
  },
);

t.test('a watch answered 410 lists again, once, in pages, and watches from the new list', async (t) => {
  // Backoffs pass at once (time steps as they sleep).
  const { candidates, api, wholeLists } = reader(['node-a', 'node-b', 'node-c'], steppingClock(T0));
  t.teardown(() => candidates.release());
  await candidates.refresh(true, [www], isLocal);
  await waitFor('the Node watch', () => api.watches.has('/api/v1/nodes'), { timeoutMs: 2_000 });
  api.watches
    .get('/api/v1/nodes')
    ?.fail(new ApiError('WATCH', '/api/v1/nodes', 410, 'Expired', 'too old resource version'));
  await waitFor(
    'watching again',
    () => api.calls.filter((c) => c === 'WATCH /api/v1/nodes from 10').length === 2,
    {
      timeoutMs: 2_000,
    },
  );
  t.equal(wholeLists(), 2, 'listed again once');
  t.ok(api.calls.includes(`LIST /api/v1/nodes limit=${WIDE_PAGE_SIZE}`), 'paged');
  t.equal(wholeLists('/api/v1/namespaces/metallb-system/pods'), 1, 'the pods are not listed again');
});

t.test('a Node list that is refused (403) is not known, and is not retried at every reconcile', async (t) => {
  const { candidates, api, clock, lists } = reader();
  t.teardown(() => candidates.release());
  api.forbidden.add('/api/v1/nodes');
  await candidates.refresh(true, [www], isLocal);
  t.equal(candidates.others, undefined, 'not known');
  for (let i = 0; i < 20; i++) {
    clock.advance(100);
    await candidates.refresh(false, [www], isLocal);
  }
  t.equal(candidates.others, undefined);
  t.equal(lists(), 1, 'one list; the next after the informer backoff, not one per reconcile');
});

t.test('narrow reads that fail back off instead of being retried at every reconcile', async (t) => {
  const { candidates, api, clock } = reader();
  t.teardown(() => candidates.release());
  api.forbidden.add('/apis/discovery.k8s.io/v1beta1/namespaces/web/endpointslices');
  // 403 on the slices is an answer (the Local service cannot move), not a failure: a 503 is one.
  await candidates.refresh(true, [www, local], isLocal);
  t.strictSame(
    candidates.perService,
    { 'web/www': ['node-b', 'node-c'] },
    'no grant: the Local service stays',
  );
  const slices = () => api.calls.filter((c) => c.includes('/endpointslices')).length;
  const before = slices();
  api.down = true;
  for (let i = 0; i < 30; i++) {
    clock.advance(200);
    await candidates.refresh(false, [www, local], isLocal);
  }
  // Due after 2 s, then backing off 1 s, 2 s, 4 s... (jittered): a handful, not 20.
  t.ok(slices() - before <= 4, `${slices() - before} reads of the slices in 6 s while failing`);
});

t.test(
  'a handover about to start whose narrow read fails with a 5xx asks again within a second (issue 23: an etcd election)',
  async (t) => {
    const { candidates, api, clock } = reader();
    t.teardown(() => candidates.release());
    const slicesPath = '/apis/discovery.k8s.io/v1beta1/namespaces/web/endpointslices';
    api.unavailable.add(slicesPath);
    const slices = () => api.calls.filter((c) => c.includes('/endpointslices')).length;
    // Reconciles every 100 ms while the handover waits for its candidates, for 6 s.
    const start = clock.now();
    const readsAt: number[] = [];
    let seen = 0;
    let known = false;
    while (clock.now() - start <= 6_000) {
      await candidates.refresh(true, [www, local], isLocal);
      if (slices() > seen) readsAt.push(clock.now() - start);
      seen = slices();
      if (candidates.others !== undefined) known = true;
      clock.advance(100);
    }
    t.notOk(known, 'not known while the read fails');
    const gaps = [
      ...readsAt.slice(1).map((at, i) => at - (readsAt[i] as number)),
      6_000 - (readsAt.at(-1) ?? 0),
    ];
    t.ok(
      Math.max(...gaps) <= 1_100,
      `asked again within a second each time (reads at ${readsAt.join(', ')} ms)`,
    );
    // The election over: known at the next read, within a second.
    api.unavailable.delete(slicesPath);
    const back = clock.now();
    while (candidates.perService === undefined && clock.now() - back <= 5_000) {
      clock.advance(100);
      await candidates.refresh(true, [www, local], isLocal);
    }
    t.ok(clock.now() - back <= 1_100, `known ${clock.now() - back} ms after the API answers again`);
    t.strictSame(candidates.perService, { 'web/www': ['node-b', 'node-c'], 'web/local': ['node-c'] });
  },
);

t.test('a handover about to start whose narrow read is answered 429 backs off as before', async (t) => {
  const { candidates, api, clock } = reader();
  t.teardown(() => candidates.release());
  api.throttled.add('/apis/discovery.k8s.io/v1beta1/namespaces/web/endpointslices');
  const slices = () => api.calls.filter((c) => c.includes('v1beta1/namespaces/web/endpointslices')).length;
  const start = clock.now();
  while (clock.now() - start <= 6_000) {
    await candidates.refresh(true, [www, local], isLocal);
    clock.advance(100);
  }
  // 1 s doubling (jittered): reads at 0, 0.5–1, +1–2, +2–4 s: at most four in 6 s.
  t.ok(slices() <= 4, `${slices()} reads of the slices in 6 s while throttled`);
});

t.test(
  'a view whose watch keeps failing is kept for 10 s, then not known; a fresh one at once',
  async (t) => {
    const { candidates, api, clock } = reader();
    t.teardown(() => candidates.release());
    await candidates.refresh(true, [www], isLocal);
    await waitFor('the Node watch', () => api.watches.has('/api/v1/nodes'), { timeoutMs: 2_000 });
    api.watches
      .get('/api/v1/nodes')
      ?.fail(new ApiError('WATCH', '/api/v1/nodes', 0, 'TransportError', 'socket hang up'));
    await waitFor('the watch failed', () => !api.watches.has('/api/v1/nodes'), { timeoutMs: 2_000 });
    await new Promise((r) => setImmediate(r));
    clock.advance(1_000);
    await candidates.refresh(false, [www], isLocal);
    t.strictSame(candidates.others, ['node-b', 'node-c'], 'kept: current a second ago');
    await candidates.refresh(true, [www], isLocal);
    t.equal(
      candidates.others,
      undefined,
      'a handover about to start does not act on a view that is not current',
    );
    clock.advance(10_000);
    await candidates.refresh(false, [www], isLocal);
    t.equal(candidates.others, undefined, 'too old: not known');
    t.equal(candidates.perService, undefined);
  },
);

t.test(
  'a handover starts on the first pages when they already give every service somewhere to go',
  async (t) => {
    const names = [
      'node-a',
      ...Array.from({ length: 2 * WIDE_PAGE_SIZE + 10 }, (_, i) => `node-${String(i).padStart(4, '0')}`),
    ];
    const { candidates, api, clock } = reader(names);
    t.teardown(() => candidates.release());
    let release: () => void = () => {};
    api.held = new Promise<void>((r) => {
      release = r;
    });
    // The only other node with a ready endpoint of the Local service is on the last page.
    const last = names.at(-1)!;
    api.readyAlsoOn = ['node-a', last];
    await candidates.refresh(true, [www], isLocal);
    t.equal(candidates.others?.length, WIDE_PAGE_SIZE - 1, 'decided on the first page (its candidates)');
    t.strictSame(candidates.perService?.['web/www']?.length, WIDE_PAGE_SIZE - 1);

    let done = false;
    const waiting = candidates.refresh(true, [www, local], isLocal).then(() => {
      done = true;
    });
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    t.notOk(done, 'a service whose only candidate is not read yet: the rest of the list is waited for');
    release();
    api.held = undefined;
    await waiting;
    t.strictSame(candidates.perService?.['web/local'], [last]);
    t.equal(candidates.others?.length, names.length - 1, 'the whole list');
    clock.advance(1_000);
    await candidates.refresh(false, [www, local], isLocal);
    t.equal(candidates.others?.length, names.length - 1);
  },
);

// Issue 23: after an etcd election the API answers again, but a handover whose reads failed in it
// waited for the next tick (a second while the API answers) before it read again and labelled.
// The reader asks for a reconcile (knowable) as soon as they can succeed; a virtual clock runs
// the informer's backoff and the narrow reads' timer.
const SLICES = '/apis/discovery.k8s.io/v1beta1/namespaces/web/endpointslices';

/** A reader on a virtual clock (its timers run in clock.advance), released at the test's end. */
function timedReader(t: Test, names = ['node-a', 'node-b', 'node-c']) {
  const clock = new VirtualClock(T0);
  const r = reader(names, clock);
  t.teardown(() => r.candidates.release());
  return { ...r, clock };
}

t.test(
  'a handover whose Node list failed (an etcd election) asks for a reconcile once it is listed again, once',
  async (t) => {
    const { candidates, api, asked, clock } = timedReader(t);
    api.unavailable.add('/api/v1/nodes');
    await candidates.refresh(true, [www], isLocal);
    t.equal(candidates.others, undefined, 'not known while the list fails');
    t.strictSame(asked, [], 'nothing to read again yet');
    api.unavailable.delete('/api/v1/nodes');
    // The informer lists again after its backoff (250 ms, jittered), well before a 1 s tick.
    await clock.advance(600);
    t.strictSame(asked, ['candidate lists current again'], 'asked for within the backoff');
    await candidates.refresh(true, [www], isLocal);
    t.strictSame(candidates.others, ['node-b', 'node-c'], 'known at that reconcile');
    // Known: the watch's events do not ask for reconciles (thousands of Nodes change all the time).
    const emit = api.watches.get('/api/v1/nodes')?.emit;
    t.ok(emit, 'the Node watch is open');
    for (let i = 0; i < 50; i++) emit?.({ type: 'MODIFIED', object: node('node-b', String(20 + i)) });
    t.strictSame(asked, ['candidate lists current again'], 'one reconcile asked for, not one per event');
  },
);

t.test(
  'a handover whose narrow read failed with a 5xx asks for one reconcile when the read is due again',
  async (t) => {
    const { candidates, api, asked, clock } = timedReader(t);
    api.unavailable.add(SLICES);
    await candidates.refresh(true, [www, local], isLocal);
    t.equal(candidates.perService, undefined, 'not known while the read fails');
    // Reconciles meanwhile (other triggers) find it backing off: still one reconcile asked for.
    for (let i = 0; i < 5; i++) await candidates.refresh(true, [www, local], isLocal);
    t.strictSame(asked, [], 'not due yet');
    api.unavailable.delete(SLICES);
    await clock.advance(1_000);
    t.strictSame(asked, ['narrow reads due again'], 'asked for once it is due (≤ 1 s at a start)');
    await candidates.refresh(true, [www, local], isLocal);
    t.strictSame(candidates.perService, { 'web/www': ['node-b', 'node-c'], 'web/local': ['node-c'] });
    await clock.advance(5_000);
    t.strictSame(asked, ['narrow reads due again'], 'known: nothing more asked');
  },
);

t.test('a narrow read due again while the refresh still waited for the lists asks at once', async (t) => {
  const names = ['node-a', ...Array.from({ length: WIDE_PAGE_SIZE + 10 }, (_, i) => `node-${i}`)];
  const { candidates, api, asked, clock } = timedReader(t, names);
  let release: () => void = () => {};
  api.held = new Promise<void>((r) => {
    release = r;
  });
  api.unavailable.add(SLICES);
  let done = false;
  const refreshing = candidates.refresh(true, [www, local], isLocal).then(() => {
    done = true;
  });
  // The lists' second page takes longer than the narrow read's backoff (≤ 1 s at a start).
  await clock.advance(1_500);
  t.notOk(done, 'still waiting for the lists');
  api.unavailable.delete(SLICES);
  release();
  api.held = undefined;
  await refreshing;
  t.equal(candidates.perService, undefined, 'not known: the narrow read failed');
  t.strictSame(asked, ['narrow reads due again'], 'asked for at once: it is due already');
});

t.test('a released reader asks for nothing: its timer is cancelled', async (t) => {
  const { candidates, api, asked, clock } = timedReader(t);
  api.unavailable.add(SLICES);
  api.unavailable.add('/api/v1/nodes');
  await candidates.refresh(true, [www, local], isLocal);
  await candidates.release();
  t.equal(clock.pending, 0, 'no timer left');
  api.unavailable.clear();
  await clock.advance(60_000);
  t.strictSame(asked, [], 'nothing asked after the release');
});
