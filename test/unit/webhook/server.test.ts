import t from 'tap';
import { appFor, applyPatch, baseOptions, decode, silent } from '../../../lab/fake/webhook.ts';
import { Registry } from '../../../shared/metrics.ts';
import { escapePointer, pointer, unescapePointer } from '../../../webhook/plan/json-patch.ts';
import { createWebhookApp } from '../../../webhook/server.ts';
import { review, skupperPod, speakerPod } from './fixtures.ts';

t.test('RFC 6901 escaping: ~ before /', async (t) => {
  t.equal(escapePointer('a~/b'), 'a~0~1b');
  t.equal(escapePointer('~1'), '~01');
  t.equal(unescapePointer('~01'), '~1');
  t.equal(
    pointer('metadata', 'annotations', 'drainguard.io/status'),
    '/metadata/annotations/drainguard.io~1status',
  );
  for (const s of ['~', '/', '~/~1/~0', 'plain', '']) t.equal(unescapePointer(escapePointer(s)), s);
});

t.test('bad input is a 400 naming what is wrong, never a 5xx', async (t) => {
  const app = appFor();
  const cases: { payload: string; contentType?: string; want: RegExp }[] = [
    { payload: '{"apiVersion": ', want: /not valid JSON/ },
    { payload: '', want: /JSON object/ },
    { payload: '[]', want: /JSON object/ },
    { payload: '"x"', want: /JSON object/ },
    { payload: '{}', want: /kind must be AdmissionReview/ },
    {
      payload: JSON.stringify({ ...review(speakerPod()), apiVersion: 'admission.k8s.io/v1beta1' }),
      want: /apiVersion must be admission\.k8s\.io\/v1/,
    },
    {
      payload: JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }),
      want: /request must be an object/,
    },
    { payload: JSON.stringify(review(speakerPod(), { uid: 5 })), want: /request\.uid/ },
    {
      payload: JSON.stringify(review(speakerPod(), { operation: 7 })),
      want: /request\.operation must be a string/,
    },
    {
      payload: JSON.stringify(review(speakerPod(), { kind: 'Pod' })),
      want: /request\.kind must be an object/,
    },
    { payload: '{"a":1}', contentType: 'text/plain', want: /kind must be AdmissionReview/ },
  ];
  for (const c of cases) {
    const res = await app.inject({
      method: 'POST',
      url: '/mutate',
      payload: c.payload,
      headers: { 'content-type': c.contentType ?? 'application/json' },
    });
    t.equal(res.statusCode, 400, `${c.payload.slice(0, 40)} → ${res.statusCode} ${res.body}`);
    t.match(JSON.parse(res.body).error, c.want);
  }
  const notFound = await app.inject({ method: 'GET', url: '/nope' });
  t.equal(notFound.statusCode, 404);
  t.match(notFound.body, /POST \/mutate/);
  await app.close();
});

t.test('a body over the limit is 413, not a crash', async (t) => {
  const app = createWebhookApp({
    planner: () => baseOptions(),
    log: silent(),
    metrics: new Registry(),
    bodyLimit: 1024,
  });
  const res = await app.inject({ method: 'POST', url: '/mutate', payload: review(speakerPod()) });
  t.equal(res.statusCode, 413);
  await app.close();
});

t.test('invalid pod shapes inside a valid review are denials, not errors', async (t) => {
  const app = appFor();
  for (const object of [
    null,
    5,
    { spec: null },
    { spec: { containers: 'x' } },
    { spec: { containers: [] } },
    { spec: { containers: [1] } },
  ]) {
    const res = await app.inject({ method: 'POST', url: '/mutate', payload: review(object) });
    const d = decode(res.statusCode, res.body);
    t.equal(d.status, 200);
    t.equal(d.allowed, false);
    t.match(d.result!.message, /request\.object/);
  }
  await app.close();
});

t.test('DELETE and CONNECT are allowed unchanged', async (t) => {
  const app = appFor();
  for (const operation of ['DELETE', 'CONNECT']) {
    const res = await app.inject({
      method: 'POST',
      url: '/mutate',
      payload: review(speakerPod(), { operation }),
    });
    const d = decode(res.statusCode, res.body);
    t.equal(d.allowed, true);
    t.equal(d.patch, undefined);
  }
  await app.close();
});

t.test(
  'a planner failure is a denial with code 500 inside a 200, and the server keeps serving',
  async (t) => {
    let calls = 0;
    const app = createWebhookApp({
      planner: () => {
        calls++;
        if (calls === 1) throw new Error('boom');
        return baseOptions();
      },
      log: silent(),
      metrics: new Registry(),
    });
    const first = decode(...(await inj(app, review(speakerPod()))));
    t.equal(first.status, 200);
    t.equal(first.allowed, false);
    t.equal(first.result?.code, 500);
    const second = decode(...(await inj(app, review(speakerPod()))));
    t.equal(second.allowed, true);
    await app.close();
  },
);

async function inj(app: ReturnType<typeof appFor>, payload: object): Promise<[number, string]> {
  const res = await app.inject({ method: 'POST', url: '/mutate', payload });
  return [res.statusCode, res.body];
}

t.test('re-invocation of the patched pod injects nothing (reinvocationPolicy: IfNeeded)', async (t) => {
  const app = appFor();
  for (const pod of [speakerPod(), skupperPod()]) {
    const d1 = decode(...(await inj(app, review(pod))));
    t.ok(d1.patch);
    if (!d1.patch) continue;
    const patched = applyPatch(pod, d1.patch);
    const d2 = decode(...(await inj(app, review(patched))));
    t.equal(d2.allowed, true);
    t.equal(d2.patch, undefined);
    // Another webhook dropping our annotation must not cause a second sidecar either.
    const noAnno = structuredClone(patched) as { metadata: { annotations?: Record<string, string> } };
    delete noAnno.metadata.annotations;
    const d3 = decode(...(await inj(app, review(noAnno))));
    t.equal(d3.patch, undefined);
  }
  await app.close();
});

t.test('healthz, readyz and Prometheus metrics by outcome and profile', async (t) => {
  let ready = false;
  const metrics = new Registry();
  const app = createWebhookApp({ planner: () => baseOptions(), log: silent(), metrics, ready: () => ready });
  t.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  t.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 503);
  ready = true;
  t.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
  await inj(app, review(speakerPod()));
  await inj(app, review({ metadata: {}, spec: { containers: [{ name: 'x' }] } }));
  await inj(app, review(speakerPod(), { operation: 'UPDATE' }));
  await app.inject({ method: 'POST', url: '/mutate', payload: '{' });
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  t.match(text, /drainguard_webhook_requests_total\{outcome="patched",profile="metallb-speaker"\} 1/);
  t.match(text, /drainguard_webhook_requests_total\{outcome="allowed",profile="no-profile"\} 1/);
  t.match(text, /drainguard_webhook_requests_total\{outcome="allowed",profile="update"\} 1/);
  t.match(text, /drainguard_webhook_requests_total\{outcome="invalid",profile="none"\} 1/);
  t.match(text, /drainguard_webhook_request_duration_seconds_count 3/);
  await app.close();
});

t.test('auto mode: native only where the target kubelet and the API server are >= 1.29', async (t) => {
  const { plan } = await import('../../../webhook/plan/index.ts');
  const req = (review(speakerPod()) as { request: Parameters<typeof plan>[0] }).request;
  const mode = (o: Parameters<typeof baseOptions>[0]) => {
    const p = plan(req, baseOptions(o));
    t.ok(p.allowed);
    if (!p.allowed) throw new Error('expected an allowed plan');
    return p.patch[0]!.path.startsWith('/spec/initContainers') ? 'native' : 'classic';
  };
  t.equal(mode({}), 'native');
  t.equal(mode({ apiServerVersion: 'v1.31.2' }), 'native');
  t.equal(mode({ apiServerVersion: 'v1.28.9' }), 'classic');
  t.equal(mode({ kubeletVersions: new Map([['node-a', 'v1.29.0-eks-1']]) }), 'native');
  t.equal(mode({ kubeletVersions: new Map([['node-a', 'garbage']]) }), 'classic');
  t.equal(mode({ kubeletVersions: new Map() }), 'classic');
  t.equal(mode({ mode: 'native', apiServerVersion: 'v1.20.2' }), 'native');
});

t.test('the hand-written response text equals the serialised response object', async (t) => {
  const { plan } = await import('../../../webhook/plan/index.ts');
  const { reviewResponse, reviewResponseText } = await import('../../../webhook/server.ts');
  for (const pod of [speakerPod(), skupperPod(), { metadata: {}, spec: { containers: [{ name: 'x' }] } }]) {
    const req = (review(pod) as { request: Parameters<typeof plan>[0] & { uid: string } }).request;
    const p = plan(req, baseOptions());
    t.strictSame(JSON.parse(reviewResponseText('u"\\1', p)), reviewResponse('u"\\1', p));
  }
});
