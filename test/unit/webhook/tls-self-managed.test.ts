// Self-managed TLS as a TlsSource, against an in-memory API: the caBundle is retried with backoff
// until the configuration exists, a rotation check applies a new serving pair, and the served
// certificate's expiry is a metric.
import t from 'tap';
import { silent } from '../../../lab/fake/webhook.ts';
import type { Clock } from '../../../shared/clock.ts';
import { ApiError } from '../../../shared/kube/api-error.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import { Registry } from '../../../shared/metrics.ts';
import { certNotAfter } from '../../../shared/pki.ts';
import { observeServing, type ServingPair } from '../../../webhook/tls.ts';
import { SelfManagedTls } from '../../../webhook/tls-self-managed.ts';

const MWC = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/drainguard';
const SECRET = '/api/v1/namespaces/ns/secrets/tls';

/** GET, POST and PUT on a map of paths: what SelfManagedTls uses of KubeClient. */
function fakeApi() {
  const objects = new Map<string, unknown>();
  let rv = 0;
  const put = (path: string, o: object) =>
    objects.set(path, {
      ...structuredClone(o),
      metadata: { ...(o as { metadata?: object }).metadata, resourceVersion: String(++rv) },
    });
  const client = {
    get: async (path: string) => {
      const o = objects.get(path);
      if (o === undefined) throw new ApiError('GET', path, 404, 'NotFound', `${path} not found`);
      return structuredClone(o);
    },
    create: async (path: string, o: { metadata: { name: string } }) => put(`${path}/${o.metadata.name}`, o),
    replace: async (path: string, o: object) => put(path, o),
  };
  return { objects, put, client: client as unknown as KubeClient };
}

/** sleep() waits until the test releases it (or the signal aborts); every wait is recorded. */
function manualClock() {
  const sleeping: { ms: number; wake: () => void }[] = [];
  const clock: Clock = {
    now: () => Date.now(),
    sleep: (ms, signal) =>
      new Promise<void>((resolve) => {
        sleeping.push({ ms, wake: resolve });
        signal?.addEventListener('abort', () => resolve(), { once: true });
      }),
  };
  /** Wakes the oldest sleeper that waits `which` ms (or not, for the caBundle's backoff). */
  const wake = async (which: (ms: number) => boolean) => {
    for (let i = 0; i < 50 && !sleeping.some((s) => which(s.ms)); i++)
      await new Promise((r) => setImmediate(r));
    const i = sleeping.findIndex((s) => which(s.ms));
    if (i < 0) throw new Error('nobody sleeps that long');
    const [s] = sleeping.splice(i, 1);
    s?.wake();
    return s?.ms as number;
  };
  return { clock, sleeping, wake };
}

const ROTATE_MS = 600_000;
const options = (client: KubeClient, clock: Clock) => ({
  client,
  namespace: 'ns',
  secretName: 'tls',
  webhookConfigName: 'drainguard',
  dnsNames: ['drainguard-webhook.ns.svc'],
  ipAddresses: [],
  caDays: 3650,
  servingDays: 365,
  rotateCheckMs: ROTATE_MS,
  log: silent(),
  clock,
});
const caBundleOf = (objects: Map<string, unknown>) =>
  (objects.get(MWC) as { webhooks: { clientConfig: { caBundle?: string } }[] }).webhooks[0]?.clientConfig
    .caBundle;

t.test('the caBundle is retried with a growing backoff until the configuration exists', async (t) => {
  const api = fakeApi();
  const { clock, wake } = manualClock();
  const tls = new SelfManagedTls(options(api.client, clock));
  t.teardown(() => tls.stop());
  const pair = await tls.load();
  t.ok(api.objects.has(SECRET), 'the Secret is written');
  // No configuration yet: start() returns after the first try, the retries go on.
  await tls.start(() => undefined);
  const backoff = (ms: number) => ms !== ROTATE_MS;
  const first = await wake(backoff);
  const second = await wake(backoff);
  t.ok(first >= 250 && first <= 500, `first wait ${first} ms`);
  t.ok(second >= 500 && second <= 1000, `second wait ${second} ms`);
  api.put(MWC, { metadata: { name: 'drainguard' }, webhooks: [{ clientConfig: {} }] });
  await wake(backoff);
  for (let i = 0; i < 50 && !caBundleOf(api.objects); i++) await new Promise((r) => setImmediate(r));
  const secret = api.objects.get(SECRET) as { data: Record<string, string> };
  t.equal(caBundleOf(api.objects), secret.data['ca-bundle.crt']);
  t.equal(Buffer.from(secret.data['tls.crt'] as string, 'base64').toString(), pair.cert);
});

t.test('a rotation check applies the serving pair another replica wrote', async (t) => {
  const api = fakeApi();
  api.put(MWC, { metadata: { name: 'drainguard' }, webhooks: [{ clientConfig: {} }] });
  const { clock, wake } = manualClock();
  const first = new SelfManagedTls(options(api.client, clock));
  t.teardown(() => first.stop());
  await first.load();
  const applied: ServingPair[] = [];
  await first.start((p) => applied.push(p));
  // Nothing changed: the check applies nothing.
  await wake((ms) => ms === ROTATE_MS);
  // Another replica finds the Secret unusable and writes new material.
  api.put(SECRET, { metadata: { name: 'tls' }, data: {} });
  const other = new SelfManagedTls(options(api.client, clock));
  const written = await other.load();
  await wake((ms) => ms === ROTATE_MS);
  for (let i = 0; i < 50 && applied.length === 0; i++) await new Promise((r) => setImmediate(r));
  t.strictSame(applied, [written]);
});

t.test("the served certificate's expiry is exported, and follows a rotation", async (t) => {
  const api = fakeApi();
  api.put(MWC, { metadata: { name: 'drainguard' }, webhooks: [{ clientConfig: {} }] });
  const { clock, wake } = manualClock();
  const metrics = new Registry();
  const tls = observeServing(new SelfManagedTls({ ...options(api.client, clock), servingDays: 30 }), metrics);
  t.teardown(() => tls.stop());
  const expiry = () => metrics.gauge(EXPIRY, '').get({ source: 'self-managed' });
  const first = await tls.load();
  t.equal(expiry(), certNotAfter(first.cert) / 1000, 'notAfter in Unix seconds, from the first load');
  t.ok((expiry() as number) - Date.now() / 1000 > 29 * 86_400, 'about 30 days ahead');
  const applied: ServingPair[] = [];
  await tls.start((p) => applied.push(p));
  // Another replica writes new material a day later: the rotation check applies it.
  api.put(SECRET, { metadata: { name: 'tls' }, data: {} });
  const dayLater: Clock = { ...clock, now: () => Date.now() + 86_400_000 };
  const written = await new SelfManagedTls({ ...options(api.client, dayLater), servingDays: 30 }).load();
  const apart = certNotAfter(written.cert) - certNotAfter(first.cert);
  t.ok(apart >= 86_400_000 && apart <= 86_405_000, `a day apart (${apart} ms)`);
  await wake((ms) => ms === ROTATE_MS);
  for (let i = 0; i < 50 && applied.length === 0; i++) await new Promise((r) => setImmediate(r));
  t.strictSame(applied, [written], 'the pair is still handed on');
  t.equal(expiry(), certNotAfter(written.cert) / 1000);
  t.match(
    metrics.render(),
    /^drainguard_webhook_certificate_expiration_timestamp_seconds\{source="self-managed"\} \d+$/m,
  );
});
const EXPIRY = 'drainguard_webhook_certificate_expiration_timestamp_seconds';
