// The coordinated candidate simulator (lab/sim/coordinated-candidate.ts) against client-go v0.37.2
// tryCoordinatedRenew, tryRelease and leasecandidate.go. A virtual clock and an in-memory API of
// the Lease and the LeaseCandidate: no network, no waiting.
import t, { type Test } from 'tap';
import { VirtualClock } from '../../../lab/fake/virtual-clock.ts';
import {
  CoordinatedCandidate,
  type CoordinatedOptions,
  type LeaseCandidateObject,
  OLDEST_EMULATION_VERSION,
  pingPending,
} from '../../../lab/sim/coordinated-candidate.ts';
import type { LeaseApi } from '../../../lab/sim/lease-candidate.ts';
import { ApiError } from '../../../shared/kube/api-error.ts';
import type { KubeObject, Lease } from '../../../shared/kube/types.ts';
import { microTime } from '../../../shared/kube/types.ts';

const NS = 'site-a';
const LEASE_PATH = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/router-leader`;
const LC_DIR = `/apis/coordination.k8s.io/v1beta1/namespaces/${NS}/leasecandidates`;
const T0 = Date.UTC(2026, 0, 1);

/** Objects by path, with resourceVersions and 404/409 as the API server answers; every call logged. */
class FakeApi {
  readonly objects = new Map<string, KubeObject>();
  readonly calls: string[] = [];
  private rv = 0;
  put(path: string, o: KubeObject): KubeObject {
    const stored = structuredClone({ ...o, metadata: { ...o.metadata, resourceVersion: String(++this.rv) } });
    this.objects.set(path, stored);
    return structuredClone(stored);
  }
  lease(): Lease | undefined {
    return this.objects.get(LEASE_PATH) as Lease | undefined;
  }
  async get<T>(path: string): Promise<T> {
    const o = this.objects.get(path);
    this.calls.push(`GET ${o ? 200 : 404} ${path}`);
    if (!o) throw new ApiError('GET', path, 404, 'NotFound', 'not found');
    return structuredClone(o) as T;
  }
  async create<T>(dir: string, body: unknown): Promise<T> {
    const o = body as KubeObject;
    const path = `${dir}/${o.metadata?.name}`;
    this.calls.push(`POST ${path}`);
    if (this.objects.has(path)) throw new ApiError('POST', path, 409, 'AlreadyExists', 'exists');
    return this.put(path, o) as T;
  }
  async replace<T>(path: string, body: unknown): Promise<T> {
    const o = body as KubeObject;
    const ok = this.objects.get(path)?.metadata?.resourceVersion === o.metadata?.resourceVersion;
    this.calls.push(`PUT ${ok ? 200 : 409} ${path}`);
    if (!ok) throw new ApiError('PUT', path, 409, 'Conflict', 'the object has been modified');
    return this.put(path, o) as T;
  }
  /** Writes to the Lease only, as "PUT code". */
  leaseWrites(): string[] {
    return this.calls
      .filter((c) => c.endsWith(LEASE_PATH) && !c.startsWith('GET'))
      .map((c) => c.split(' /')[0]!);
  }
}

function world(t: Test, o: Partial<CoordinatedOptions> = {}) {
  const clock = new VirtualClock(T0);
  const api = new FakeApi();
  const logs: string[] = [];
  const c = new CoordinatedCandidate({
    client: api as LeaseApi,
    namespace: NS,
    lease: 'router-leader',
    identity: 'router-a',
    clock,
    random: () => 0.5,
    log: (msg) => logs.push(msg),
    ...o,
  });
  t.teardown(() => c.stop());
  /** The controller's write naming a holder (its 5 s Lease, no acquireTime). */
  const elect = (holder: string) =>
    api.put(LEASE_PATH, {
      metadata: { name: 'router-leader', namespace: NS },
      spec: {
        holderIdentity: holder,
        leaseDurationSeconds: 5,
        renewTime: microTime(clock.now()),
        strategy: OLDEST_EMULATION_VERSION,
      },
    } as Lease);
  return { clock, api, logs, c, elect };
}

t.test('tryCoordinatedRenew never creates or takes a Lease', async (t) => {
  const { clock, api, c, elect } = world(t);
  c.start();
  await clock.to(10_000);
  t.notOk(
    api.calls.some((x) => x.startsWith('POST') && x.endsWith(LEASE_PATH)),
    'no Lease created',
  );
  // Held by another candidate, then left to expire; then released (holder ""): never taken.
  elect('router-b');
  await clock.to(40_000);
  api.put(LEASE_PATH, {
    ...api.lease()!,
    spec: { ...api.lease()!.spec, holderIdentity: '', leaseDurationSeconds: 1 },
  });
  await clock.to(60_000);
  t.strictSame(api.leaseWrites(), []);
  t.equal(c.intervals.length, 0);
  t.ok(c.attempts >= 10, `${c.attempts} tries`);
});

t.test('named by the controller: renews with its own duration, strategy and acquireTime kept', async (t) => {
  const { clock, api, c, elect } = world(t);
  c.start();
  await clock.to(1_000);
  elect('router-a');
  await clock.to(4_000);
  t.ok(c.leading, 'leads at its next try');
  const spec = api.lease()!.spec!;
  t.equal(spec.holderIdentity, 'router-a');
  t.equal(spec.leaseDurationSeconds, 15);
  t.equal(spec.strategy, OLDEST_EMULATION_VERSION);
  t.equal(spec.acquireTime, null, 'the controller set none');
  t.equal(spec.leaseTransitions, 0);
  const renews = api.leaseWrites().length;
  await clock.to(10_000);
  t.ok(api.leaseWrites().length >= renews + 2, 'renews every RetryPeriod');
});

t.test("preferredHolder: the holder stops renewing ('end of term') and releases", async (t) => {
  const { clock, api, c, elect, logs } = world(t);
  c.start();
  elect('router-a');
  await clock.to(4_000);
  t.ok(c.leading);
  const lease = api.lease()!;
  api.put(LEASE_PATH, { ...lease, spec: { ...lease.spec, preferredHolder: 'router-b' } });
  const marked = clock.now();
  const writes = api.leaseWrites().length;
  await clock.to(20_000);
  t.notOk(c.leading);
  const last = c.intervals.at(-1)!;
  t.equal(last.endedBy, 'lost');
  t.ok(last.end! - marked <= 12_000, `ended ${last.end! - marked} ms after the mark`);
  t.ok(logs.includes("Lease is marked as 'end of term'"));
  t.strictSame(api.leaseWrites().slice(writes), ['PUT 200'], 'one write after the mark: the release');
  const released = api.lease()!.spec!;
  t.equal(released.holderIdentity, '');
  t.equal(released.leaseDurationSeconds, 1);
  t.equal(released.strategy, undefined, 'client-go drops the strategy on release');
});

t.test('LeaseCandidate: created once synced, acked when pinged, only then', async (t) => {
  const { clock, api, c } = world(t, { binaryVersion: '1.37.2', emulationVersion: '1.36.0' });
  c.start();
  const reg = c.registration;
  reg.observe(undefined, 'SYNC');
  await clock.advance(0);
  const path = `${LC_DIR}/router-a`;
  const created = api.objects.get(path) as LeaseCandidateObject;
  t.strictSame(created.spec, {
    leaseName: 'router-leader',
    binaryVersion: '1.37.2',
    emulationVersion: '1.36.0',
    strategy: OLDEST_EMULATION_VERSION,
    renewTime: microTime(T0),
  });
  reg.observe(structuredClone(created), 'ADDED');
  await clock.to(3_000);
  t.equal(reg.renewals, 0, 'no ping, no write');
  const pinged = api.put(path, { ...created, spec: { ...created.spec, pingTime: microTime(clock.now()) } });
  reg.observe(pinged, 'MODIFIED');
  await clock.advance(0);
  t.equal(reg.renewals, 1);
  const acked = api.objects.get(path) as LeaseCandidateObject;
  t.equal(acked.spec?.renewTime, microTime(T0 + 3_000));
  t.notOk(pingPending(acked));
  reg.observe(acked, 'MODIFIED');
  await clock.to(60_000);
  t.equal(reg.renewals, 1, 'an acked ping is not answered again');
  await clock.to(5 * 60_000 + 3_000);
  t.equal(reg.renewals, 2, 'renewed 5 min after the last good write');
});

t.test(
  'LeaseCandidate: a stale cache gets 409, retried with backoff once the cache catches up',
  async (t) => {
    const { clock, api, c } = world(t);
    c.start();
    const reg = c.registration;
    const path = `${LC_DIR}/router-a`;
    const lc = api.put(path, {
      metadata: { name: 'router-a', namespace: NS },
      spec: { renewTime: microTime(T0), pingTime: microTime(T0 + 1) },
    } as LeaseCandidateObject);
    reg.observe(structuredClone(lc), 'SYNC');
    api.put(path, lc); // someone wrote since: the cached resourceVersion is stale
    await clock.advance(0);
    t.equal(reg.renewals, 0);
    t.ok(api.calls.includes(`PUT 409 ${path}`));
    reg.observe(api.objects.get(path), 'MODIFIED');
    await clock.advance(10);
    t.equal(reg.renewals, 1);
    t.ok(pingPending({ spec: { renewTime: microTime(T0), pingTime: microTime(T0 + 1) } }));
    t.notOk(pingPending({ spec: { renewTime: microTime(T0) } }));
  },
);
