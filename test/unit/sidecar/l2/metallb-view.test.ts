// MetalLB's view (metallb-view.ts) over a scripted API: where the VIPs come from, and which
// ServiceL2Status confirms a handover (written after it started, by a node that may announce).
import t from 'tap';
import { fakeContext, ManualClock } from '../../../../lab/fake/feature-context.ts';
import { waitFor } from '../../../../shared/clock.ts';
import { ApiError } from '../../../../shared/kube/api-error.ts';
import type { KubeClient } from '../../../../shared/kube/client.ts';
import type { KubeObject } from '../../../../shared/kube/types.ts';
import { MetalLbReader } from '../../../../sidecar/l2/metallb-view.ts';

const T0 = Date.UTC(2026, 10, 24, 9, 0, 0);
const STATUSES = '/apis/metallb.io/v1beta1/namespaces/metallb-system/servicel2statuses';

let rv = 100;
function l2Status(
  name: string,
  node: string,
  service: string | undefined,
  writtenAt: number,
  interfaces = ['eth0'],
): KubeObject {
  return {
    metadata: {
      name,
      namespace: 'metallb-system',
      resourceVersion: String(rv++),
      creationTimestamp: new Date(writtenAt - 60_000).toISOString(),
      managedFields: [{ time: new Date(writtenAt).toISOString() }],
    } as KubeObject['metadata'],
    status: {
      node,
      ...(service ? { serviceName: service, serviceNamespace: 'web' } : {}),
      interfaces: interfaces.map((i) => ({ name: i })),
    },
  } as KubeObject;
}

const lb = (name: string, ip: string, local = false) => ({
  metadata: { name, namespace: 'web' },
  spec: { type: 'LoadBalancer', ...(local ? { externalTrafficPolicy: 'Local' } : {}) },
  status: { loadBalancer: { ingress: [{ ip }] } },
});

/** ServiceL2Status list + watch (events pushed by the test), Services, the CRD's discovery. */
function metallbApi(opts: { crd: boolean; statuses: KubeObject[] }) {
  const services = [
    lb('www', '192.0.2.10'),
    lb('api', '192.0.2.11', true),
    { metadata: { name: 'db', namespace: 'web' }, spec: { type: 'ClusterIP' } },
  ];
  let push: ((ev: { type: string; object: KubeObject }) => void) | undefined;
  let discoveries = 0;
  let statusesFail = false;
  /** Each ServiceL2Status list: from the watch cache (resourceVersion=0) or consistent (from etcd). */
  const statusReads: string[] = [];
  const serviceReads: { limit: unknown; continue: unknown }[] = [];
  const client = {
    async get(
      path: string,
      q?: { query?: Record<string, string | number | undefined>; onText?: (c: string) => void },
    ) {
      if (path === '/apis/metallb.io/v1beta1') {
        discoveries++;
        if (!opts.crd) throw new ApiError('GET', path, 404, 'NotFound', 'no such group');
        return { resources: [{ name: 'servicel2statuses' }] };
      }
      if (path === STATUSES) {
        statusReads.push(q?.query?.resourceVersion === undefined ? 'consistent' : 'cache');
        if (statusesFail) throw new ApiError('GET', path, 500, 'InternalError', 'etcdserver: leader changed');
        return { metadata: { resourceVersion: '99' }, items: [...opts.statuses] };
      }
      if (path === '/api/v1/services') {
        // Paged (limit/continue) and streamed when asked to, as the API server and client do.
        const from = Number(q?.query?.continue ?? 0);
        const limit = Number(q?.query?.limit ?? services.length);
        serviceReads.push({ limit: q?.query?.limit, continue: q?.query?.continue });
        const next = from + limit < services.length ? String(from + limit) : undefined;
        const text = JSON.stringify({
          metadata: { resourceVersion: '7', ...(next ? { continue: next } : {}) },
          items: services.slice(from, from + limit),
        });
        if (!q?.onText) return JSON.parse(text);
        for (let i = 0; i < text.length; i += 61) q.onText(text.slice(i, i + 61));
        return undefined;
      }
      const svc = services.find((s) => path === `/api/v1/namespaces/web/services/${s.metadata.name}`);
      if (svc) return svc;
      throw new ApiError('GET', path, 404, 'NotFound', 'no such object');
    },
    watch(_path: string, _q: unknown, onEvent: typeof push, signal: AbortSignal) {
      push = onEvent;
      return new Promise<void>((resolve) =>
        signal.addEventListener('abort', () => resolve(), { once: true }),
      );
    },
  } as unknown as KubeClient;
  const clock = new ManualClock(T0);
  const { ctx } = fakeContext({
    env: {
      DRAINGUARD_PROFILE: 'metallb-speaker',
      DRAINGUARD_FEATURES: 'l2-handover',
      DRAINGUARD_POD_NAME: 'speaker-a',
      DRAINGUARD_POD_NAMESPACE: 'metallb-system',
      DRAINGUARD_NODE_NAME: 'node-a',
    },
    client,
    clock,
  });
  let changes = 0;
  const view = new MetalLbReader(ctx, () => changes++);
  return {
    view,
    clock,
    push: (type: string, object: KubeObject) => push?.({ type, object }),
    changes: () => changes,
    /** How many times the CRD's discovery document was asked for. */
    discoveries: () => discoveries,
    serviceReads,
    services,
    statusReads,
    /** The API server fails ServiceL2Status lists (a stale one, its etcd member gone). */
    failStatuses: (fail: boolean) => {
      statusesFail = fail;
    },
  };
}

const anyNode = () => undefined;

t.test(
  'no ServiceL2Status CRD (MetalLB < 0.14.4): VIPs of every LoadBalancer Service, nothing confirms',
  async (t) => {
    const w = metallbApi({ crd: false, statuses: [] });
    t.equal(w.view.statusSource(), 'unknown', 'not known before the check');
    await w.view.checkCrd();
    await w.view.readAllServices();
    t.match(w.view.observe(T0, anyNode), {
      statusSource: 'services',
      synced: true,
      announced: [
        { service: 'web/www', ips: ['192.0.2.10'] },
        { service: 'web/api', ips: ['192.0.2.11'] },
      ],
      newOwners: {},
    });
    t.equal(w.view.isLocal('web/api'), true);
    t.equal(w.view.isLocal('web/www'), false);
    await w.view.stop();
  },
);

t.test('the Services fallback reads in pages of 250 (limit/continue), never one unpaged list', async (t) => {
  const w = metallbApi({ crd: false, statuses: [] });
  for (let i = 0; i < 600; i++) w.services.push(lb(`s${i}`, `198.51.100.${i % 250}`));
  await w.view.checkCrd();
  await w.view.readAllServices();
  // Before: one GET /api/v1/services with no limit, held and parsed whole.
  t.strictSame(w.serviceReads, [
    { limit: 250, continue: undefined },
    { limit: 250, continue: '250' },
    { limit: 250, continue: '500' },
  ]);
  t.equal(w.view.observe(T0, anyNode).announced.length, 602, 'every LoadBalancer with an address');
  await w.view.stop();
});

t.test(
  'ServiceL2Status: own services read; another node confirms only if written after the start and eligible',
  async (t) => {
    const w = metallbApi({
      crd: true,
      statuses: [
        l2Status('own', 'node-a', 'www', T0 - 600_000),
        // Written 0.5 s before the start by the server's clock (second precision): counts.
        l2Status('b-api', 'node-b', 'api', T0 - 500),
        // Left in place long ago by MetalLB < 0.16: proves nothing.
        l2Status('c-www', 'node-c', 'www', T0 - 60_000),
      ],
    });
    t.teardown(() => w.view.stop());
    await w.view.checkCrd();
    const seen = await waitFor(
      'own Service read',
      () => {
        const o = w.view.observe(T0, anyNode);
        return o.synced && o.announced.length > 0 ? o : undefined;
      },
      { timeoutMs: 5_000 },
    );
    t.match(seen, {
      statusSource: 'servicel2status',
      announced: [{ service: 'web/www', ips: ['192.0.2.10'] }],
      newOwners: { 'web/api': 'node-b' },
      interfaces: { 'web/www': ['eth0'] },
    });
    t.strictSame(seen.newOwners, { 'web/api': 'node-b' });
    t.strictSame(w.view.observe(T0, () => ['node-c']).newOwners, {}, 'node-b may not announce web/api');
    // No handover started (a fail-safe entered right after a cordon, before the candidates were
    // read): every status is from before it, lingering as MetalLB < 0.16 leaves other nodes'.
    // Taken as confirmations they dropped web/www outright instead of holding it (issue 42).
    t.strictSame(w.view.observe(undefined, anyNode).newOwners, {}, 'no handover: none confirms');

    // node-c writes its status again after the start: now it confirms.
    w.clock.advance(100);
    w.push('MODIFIED', l2Status('c-www', 'node-c', 'www', T0 + 100));
    t.strictSame(w.view.observe(T0, anyNode).newOwners, { 'web/api': 'node-b', 'web/www': 'node-c' });
    w.push('DELETED', l2Status('b-api', 'node-b', 'api', T0 + 100));
    t.strictSame(w.view.observe(T0, anyNode).newOwners, { 'web/www': 'node-c' });
    t.ok(w.changes() > 0, 'each change asks for a reconcile');
  },
);

t.test(
  'CRD with nothing usable (0.14.4–0.14.5 without the flag): Services, until a usable status is seen, then for good',
  async (t) => {
    const w = metallbApi({ crd: true, statuses: [l2Status('bare', 'node-b', undefined, T0 - 1_000)] });
    t.teardown(() => w.view.stop());
    await w.view.checkCrd();
    await waitFor('listed', () => w.view.statusSource() === 'services', { timeoutMs: 5_000 });
    const usable = l2Status('b-www', 'node-b', 'www', T0 + 100);
    w.push('ADDED', usable);
    t.equal(w.view.statusSource(), 'servicel2status');
    // MetalLB >= 0.14.6 deletes and re-creates objects as VIPs move: "none now" is not "never".
    w.push('DELETED', usable);
    t.equal(w.view.statusSource(), 'servicel2status');
  },
);

t.test(
  'no CRD: its discovery GET backs off from 30 s to 10 min, and a CRD installed later is still noticed',
  async (t) => {
    const api = { crd: false, statuses: [] as KubeObject[] };
    const w = metallbApi(api);
    t.teardown(() => w.view.stop());
    // The feature asks every 30 s (its tick); two hours of that.
    const TICK = 30_000;
    const hour = async () => {
      const before = w.discoveries();
      for (let i = 0; i < 3_600_000 / TICK; i++) {
        await w.view.checkCrd();
        w.clock.advance(TICK);
      }
      return w.discoveries() - before;
    };
    const first = await hour();
    const second = await hour();
    t.equal(w.view.statusSource(), 'services');
    t.ok(first <= 16, `${first} discovery GETs in the first hour (one every 30 s would be 120)`);
    t.ok(second <= 12, `${second} discovery GETs in the second hour: at most one every 5 min`);

    api.crd = true;
    api.statuses = [l2Status('b-www', 'node-b', 'www', w.clock.now())];
    const installed = w.clock.now();
    while (w.view.statusSource() === 'services' && w.clock.now() - installed <= 3_600_000) {
      await w.view.checkCrd();
      w.clock.advance(TICK);
    }
    t.equal(w.view.statusSource(), 'servicel2status', 'the CRD installed later is found');
    t.ok(
      w.clock.now() - installed <= 630_000,
      `found ${(w.clock.now() - installed) / 1000} s after it was installed (at most 10 min and one tick)`,
    );
  },
);

t.test(
  'a silent watch (a stale API server): a consistent read sees the new owner; a later watch event wins again',
  async (t) => {
    const statuses = [l2Status('own', 'node-a', 'www', T0 - 600_000)];
    const w = metallbApi({ crd: true, statuses });
    t.teardown(() => w.view.stop());
    await w.view.checkCrd();
    await waitFor('own Service read', () => w.view.observe(T0, anyNode).announced.length > 0, {
      timeoutMs: 5_000,
    });
    // node-b answers for web/www after the handover started; the watch never says so.
    w.clock.advance(4_000);
    statuses.push(l2Status('b-www', 'node-b', 'www', T0 + 4_000));
    t.strictSame(w.view.observe(T0, anyNode).newOwners, {}, 'the watch is silent');

    // A stale server fails the consistent read: nothing changes, nothing throws.
    w.failStatuses(true);
    await w.view.readStatusesConsistently();
    t.strictSame(w.view.observe(T0, anyNode).newOwners, {});
    w.failStatuses(false);
    const changes = w.changes();
    await w.view.readStatusesConsistently();
    t.strictSame(w.view.observe(T0, anyNode).newOwners, { 'web/www': 'node-b' }, 'confirmed by the read');
    t.ok(w.changes() > changes, 'the read asks for a reconcile');
    t.strictSame(w.statusReads.slice(-2), ['consistent', 'consistent'], 'no resourceVersion: from etcd');

    // The watch is back and says node-b's status is gone: the newer view is the watch's.
    w.clock.advance(100);
    w.push('DELETED', l2Status('b-www', 'node-b', 'www', T0 + 4_000));
    t.strictSame(w.view.observe(T0, anyNode).newOwners, {});

    // A status written before the handover started, first seen by a consistent read, confirms
    // nothing: its write time is the server's, not when it was seen.
    statuses.splice(1, 1, l2Status('c-www', 'node-c', 'www', T0 - 60_000));
    w.clock.advance(100);
    await w.view.readStatusesConsistently();
    t.strictSame(w.view.observe(T0, anyNode).newOwners, {});
  },
);

t.test(
  "interfaces: what this node's ServiceL2Status objects name now, per service; a name from a status since rewritten or deleted restricts nothing",
  async (t) => {
    const w = metallbApi({
      crd: true,
      statuses: [
        l2Status('own-www', 'node-a', 'www', T0 - 600_000, ['eth1']),
        l2Status('own-api', 'node-a', 'api', T0 - 600_000, []),
        l2Status('b-db', 'node-b', 'db', T0 - 600_000, ['eth7']),
      ],
    });
    t.teardown(() => w.view.stop());
    await w.view.checkCrd();
    const seen = await waitFor(
      'own Services read',
      () => {
        const o = w.view.observe(T0, anyNode);
        return o.synced && o.announced.length === 2 ? o : undefined;
      },
      { timeoutMs: 5_000 },
    );
    t.strictSame(
      seen.interfaces,
      { 'web/www': ['eth1'], 'web/api': [] },
      "per own service; [] = every interface (MetalLB's default); another node's names are not ours",
    );
    // The L2Advertisement restricted to eth1 is deleted: MetalLB rewrites the status naming none.
    w.clock.advance(100);
    w.push('MODIFIED', l2Status('own-www', 'node-a', 'www', T0 + 100, []));
    t.strictSame(w.view.observe(T0, anyNode).interfaces, { 'web/www': [], 'web/api': [] });
    // Before: every name ever seen stayed, and restricted the fence for the sidecar's whole life.
    w.push('DELETED', l2Status('own-www', 'node-a', 'www', T0 + 100, []));
    w.push('MODIFIED', l2Status('own-api', 'node-a', 'api', T0 + 100, ['eth2']));
    t.strictSame(w.view.observe(T0, anyNode).interfaces, { 'web/api': ['eth2'] });
  },
);
