// The HTTPS front: AdmissionReview v1 in, AdmissionReview v1 out. Input problems are 4xx with a
// message naming what is wrong; the planner's answers (allow, patch, deny) are always HTTP 200.
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from '../shared/log.ts';
import type { Registry } from '../shared/metrics.ts';
import { plan } from './plan/index.ts';
import type { AdmissionRequestLike, Plan, PlannerOptions } from './plan/step.ts';

export interface WebhookAppOptions {
  /** Current planner options (node versions change while running). */
  planner: () => PlannerOptions;
  log: Logger;
  metrics: Registry;
  https?: { cert: string; key: string };
  /** Ready: serving certificate loaded and (with cluster access) node versions synced. */
  ready?: () => boolean;
  /** True once SIGTERM arrived: readiness goes false, requests are still answered (see main.ts). */
  draining?: () => boolean;
  bodyLimit?: number;
}

/** The API server sends at most 3 MiB (its request size limit): anything bigger is not from it. */
export const BODY_LIMIT = 3 * 1024 * 1024;
/** Slow clients: whole request within 15 s (webhook timeoutSeconds is at most 30), headers within 10 s. */
export const REQUEST_TIMEOUT_MS = 15_000;
export const HEADERS_TIMEOUT_MS = 10_000;
/** Idle kept-alive sockets: below the socket timeout, as Node requires. */
export const KEEP_ALIVE_TIMEOUT_MS = 72_000;
export const CONNECTION_TIMEOUT_MS = 120_000;
/** Open connections per replica: the API servers keep a few each; a flood must not exhaust memory. */
export const MAX_CONNECTIONS = 1024;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

class BadRequest extends Error {}

/** Validates the envelope; returns the request or throws BadRequest naming the field. */
function readReview(body: unknown): AdmissionRequestLike & { uid: string } {
  if (!isObj(body))
    throw new BadRequest('body must be a JSON object (an admission.k8s.io/v1 AdmissionReview)');
  if (body.kind !== 'AdmissionReview')
    throw new BadRequest(`kind must be AdmissionReview, got ${JSON.stringify(body.kind ?? null)}`);
  if (body.apiVersion !== 'admission.k8s.io/v1')
    throw new BadRequest(
      `apiVersion must be admission.k8s.io/v1 (admissionReviewVersions: ["v1"]), got ${JSON.stringify(body.apiVersion ?? null)}`,
    );
  const req = body.request;
  if (!isObj(req)) throw new BadRequest('request must be an object');
  if (typeof req.uid !== 'string' || req.uid === '')
    throw new BadRequest('request.uid must be a non-empty string');
  for (const f of ['kind', 'resource'] as const)
    if (req[f] !== undefined && !isObj(req[f])) throw new BadRequest(`request.${f} must be an object`);
  for (const f of ['operation', 'namespace', 'subResource', 'name'] as const)
    if (req[f] !== undefined && req[f] !== null && typeof req[f] !== 'string')
      throw new BadRequest(`request.${f} must be a string`);
  return req as unknown as AdmissionRequestLike & { uid: string };
}

/**
 * The response as JSON text: the patch is base64 inside a JSON string, so the envelope is written
 * directly instead of serialising an object that holds it (the hot path of every admission).
 */
export function reviewResponseText(uid: string, p: Plan): string {
  if (!p.allowed) return JSON.stringify(reviewResponse(uid, p));
  let text = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":${JSON.stringify(uid)},"allowed":true`;
  if (p.patch.length > 0)
    text += `,"patchType":"JSONPatch","patch":"${Buffer.from(JSON.stringify(p.patch)).toString('base64')}"`;
  if (p.warnings.length > 0) text += `,"warnings":${JSON.stringify(p.warnings)}`;
  return `${text}}}`;
}

export function reviewResponse(uid: string, p: Plan): Obj {
  const response: Obj = { uid, allowed: p.allowed };
  if (p.allowed) {
    if (p.patch.length > 0) {
      response.patchType = 'JSONPatch';
      response.patch = Buffer.from(JSON.stringify(p.patch)).toString('base64');
    }
    if (p.warnings.length > 0) response.warnings = p.warnings;
  } else {
    response.status = {
      code: p.code,
      message: p.message,
      reason: p.code === 400 ? 'BadRequest' : p.code >= 500 ? 'InternalError' : 'Forbidden',
    };
  }
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}

export function createWebhookApp(opts: WebhookAppOptions): FastifyInstance {
  const app = Fastify({
    // No per-request child loggers (a measurable share of a ~50 µs request): handlers log
    // through opts.log themselves, and only what matters (patches, denials, warnings).
    logger: false,
    // A pod object can approach etcd's 1.5 MiB limit; the default 1 MiB would refuse it.
    bodyLimit: opts.bodyLimit ?? BODY_LIMIT,
    requestTimeout: REQUEST_TIMEOUT_MS,
    connectionTimeout: CONNECTION_TIMEOUT_MS,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    return503OnClosing: true,
    ...(opts.https
      ? { https: { cert: opts.https.cert, key: opts.https.key, minVersion: 'TLSv1.2' as const } }
      : {}),
  }) as unknown as FastifyInstance;

  app.server.headersTimeout = HEADERS_TIMEOUT_MS;
  app.server.maxConnections = MAX_CONNECTIONS;
  const draining = opts.draining ?? (() => false);
  // While draining, every answer ends its connection: the API server's next request opens a new one,
  // which the Service routes to a ready replica.
  app.addHook('onSend', async (_req, reply) => {
    if (draining()) reply.header('connection', 'close');
  });

  const requests = opts.metrics.counter(
    'drainguard_webhook_requests_total',
    'AdmissionReview requests by outcome (patched, allowed, denied, invalid) and profile or reason.',
  );
  const latency = opts.metrics.histogram(
    'drainguard_webhook_request_duration_seconds',
    'Time to answer one AdmissionReview.',
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  );

  // Own JSON parser: malformed JSON is a 400 that says so, whatever the content type claims.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => {
    const text = body as string;
    if (text === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (e) {
      const err = new Error(`request body is not valid JSON: ${(e as Error).message}`) as Error & {
        statusCode: number;
      };
      err.statusCode = 400;
      done(err, undefined);
    }
  });

  app.setErrorHandler((err: Error & { statusCode?: number }, _req, reply) => {
    const code = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 400;
    requests.inc({ outcome: 'invalid', profile: 'none' });
    reply.code(code).send({ error: err.message });
  });
  app.setNotFoundHandler((req, reply) => {
    reply.code(404).send({
      error: `no route ${req.method} ${req.url}; routes are POST /mutate, GET /healthz /readyz /metrics`,
    });
  });

  app.post('/mutate', async (req, reply) => {
    const started = performance.now();
    let request: AdmissionRequestLike & { uid: string };
    try {
      request = readReview(req.body);
    } catch (e) {
      if (!(e instanceof BadRequest)) throw e;
      requests.inc({ outcome: 'invalid', profile: 'none' });
      return reply.code(400).send({ error: e.message });
    }
    let p: Plan;
    try {
      p = plan(request, opts.planner());
    } catch (e) {
      // A planner bug must not become a 5xx or an injected half-pod: deny, say why, keep serving.
      opts.log.error({ err: (e as Error).message, uid: request.uid }, 'planner failed');
      p = {
        allowed: false,
        code: 500,
        message: `drainguard: internal error: ${(e as Error).message}`,
        outcome: 'denied',
      };
    }
    const outcome = !p.allowed ? 'denied' : p.patch.length > 0 ? 'patched' : 'allowed';
    const profile = p.allowed ? p.outcome : (p.profile ?? 'none');
    requests.inc({ outcome, profile });
    latency.observe({}, (performance.now() - started) / 1000);
    if (outcome !== 'allowed' || (p.allowed && p.warnings.length > 0))
      opts.log.info(
        { uid: request.uid, namespace: request.namespace, outcome, profile, dryRun: request.dryRun === true },
        p.allowed ? 'admission answered' : `denied: ${p.message}`,
      );
    return reply.type('application/json').send(reviewResponseText(request.uid, p));
  });

  app.get('/healthz', async () => ({ ok: true }));
  app.get('/readyz', async (_req, reply) =>
    !draining() && (opts.ready?.() ?? true) ? { ready: true } : reply.code(503).send({ ready: false }),
  );
  app.get('/metrics', async (_req, reply) =>
    reply.type('text/plain; version=0.0.4').send(opts.metrics.render()),
  );
  return app;
}
