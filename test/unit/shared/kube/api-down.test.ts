// What counts as "API down" (the L2 fail-safe acts on it): only the API server being unreachable
// or failing — a transport error, a timeout, 5xx, 429 — never an answer that refuses one request
// (403 on a watch the role does not allow, 404 for a missing CRD). Those are configuration errors:
// logged, each once in a while, and the API stays "up".
import type http from 'node:http';
import t from 'tap';
import { fakeApiServer as fakeApi } from '../../../../lab/fake/api-server.ts';
import { ApiError, countsAsApiDown } from '../../../../shared/kube/api-error.ts';
import { createLogger } from '../../../../shared/log.ts';
import { apiHealthReporter } from '../../../../sidecar/main.ts';

const fakeApiServer = (handler: http.RequestListener, onResult: (ok: boolean, err?: ApiError) => void) =>
  fakeApi(handler, { onResult });

const status = (code: number, reason: string, message: string) =>
  JSON.stringify({ kind: 'Status', code, reason, message });

t.test('countsAsApiDown: unreachable, timeouts, 429 and 5xx; not 401/403/404/409/410/422', async (t) => {
  const e = (code: number) => new ApiError('GET', '/x', code, 'R', 'm');
  for (const code of [0, 408, 429, 500, 502, 503, 504]) t.ok(countsAsApiDown(e(code)), `${code} is down`);
  for (const code of [400, 401, 403, 404, 409, 410, 422])
    t.notOk(countsAsApiDown(e(code)), `${code} is an answer`);
  t.ok(countsAsApiDown(undefined), 'a failure with no error at all: unreachable');
});

t.test('a refused watch reports its error (403, 404) to onResult; the API is not "down"', async (t) => {
  const results: { ok: boolean; code: number | undefined }[] = [];
  const client = await fakeApiServer(
    (req, res) => {
      const forbidden = req.url?.startsWith('/apis/coordination.k8s.io') ?? false;
      res.writeHead(forbidden ? 403 : 404, { 'content-type': 'application/json' });
      res.end(
        forbidden
          ? status(
              403,
              'Forbidden',
              'leases.coordination.k8s.io is forbidden: User "sa" cannot watch resource "leases"',
            )
          : status(404, 'NotFound', 'the server could not find the requested resource'),
      );
    },
    (ok, err) => results.push({ ok, code: err?.code }),
  );
  const signal = new AbortController().signal;
  await t.rejects(
    client.watch('/apis/coordination.k8s.io/v1/namespaces/a/leases', {}, () => {}, signal),
    {
      code: 403,
    },
  );
  await t.rejects(
    client.watch('/apis/metallb.io/v1beta1/servicel2statuses', {}, () => {}, signal),
    {
      code: 404,
    },
  );
  t.strictSame(results, [
    { ok: false, code: 403 },
    { ok: false, code: 404 },
  ]);
});

t.test('a watch whose connection fails reports a transport error (down)', async (t) => {
  const results: { ok: boolean; err: ApiError | undefined }[] = [];
  const client = await fakeApiServer(
    (req) => req.socket.destroy(),
    (ok, err) => results.push({ ok, err }),
  );
  await t.rejects(
    client.watch('/api/v1/nodes', {}, () => {}, new AbortController().signal),
    { code: 0 },
  );
  t.equal(results.length, 1);
  t.equal(results[0]?.err?.code, 0);
  t.ok(countsAsApiDown(results[0]?.err));
});

t.test(
  'the sidecar: a refused watch keeps the API up and is logged once as a configuration error',
  async (t) => {
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('test', 'info', { write: (l: string) => lines.push(JSON.parse(l)) });
    const fed: boolean[] = [];
    let now = 0;
    const report = apiHealthReporter({ log, apiResult: (ok) => fed.push(ok), now: () => now });
    const forbidden = new ApiError(
      'WATCH',
      '/apis/coordination.k8s.io/v1/namespaces/a/leases',
      403,
      'Forbidden',
      'cannot watch leases',
    );
    report(false, forbidden);
    report(false, forbidden);
    report(
      false,
      new ApiError('GET', '/apis/coordination.k8s.io/v1/namespaces/a/leases/x', 404, 'NotFound', 'not found'),
    );
    t.strictSame(fed, [true, true, true], 'answers from a live API server: not down');
    const refusals = lines.filter(
      (l) => l.msg === 'API refused a request: a configuration error, not an outage',
    );
    t.equal(refusals.length, 1, 'logged once, not at every retry; a 404 on a GET is an ordinary answer');
    t.match(refusals[0], {
      level: 'error',
      code: 403,
      path: '/apis/coordination.k8s.io/v1/namespaces/a/leases',
    });
    now += 10 * 60_000;
    report(false, forbidden);
    t.equal(lines.filter((l) => l.msg === refusals[0]?.msg).length, 2, 'and again after a while');
    report(false, new ApiError('GET', '/api/v1/nodes/a', 0, 'TransportError', 'connect ECONNREFUSED'));
    report(false, new ApiError('GET', '/api/v1/nodes/a', 503, 'ServiceUnavailable', 'x'));
    report(false, undefined);
    report(true);
    t.strictSame(fed.slice(4), [false, false, false, true]);
  },
);
