// The webhook's test kit: planner options, a fastify app, an AdmissionReview answer decoded and
// its patch applied, a certificate directory mounted as the kubelet does; for its unit and e2e tests.
import { mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pod } from 'kubernetes-models/v1';
import { createLogger } from '../../shared/log.ts';
import { Registry } from '../../shared/metrics.ts';
import type { CertPair } from '../../shared/pki.ts';
import { applyPatch, type PatchOp } from '../../webhook/plan/json-patch.ts';
import type { PlannerOptions } from '../../webhook/plan/step.ts';
import { createWebhookApp } from '../../webhook/server.ts';

export const silent = () => createLogger('test', 'silent');

export const baseOptions = (o: Partial<PlannerOptions> = {}): PlannerOptions => ({
  image: 'registry.example/drainguard:0.1.0',
  mode: 'auto',
  version: '0.1.0',
  kubeletVersions: new Map([
    ['node-a', 'v1.30.4'],
    ['node-b', 'v1.30.4'],
  ]),
  selfLabels: { 'app.kubernetes.io/name': 'drainguard', 'app.kubernetes.io/component': 'webhook' },
  ...o,
});

export function appFor(opts: PlannerOptions = baseOptions()) {
  return createWebhookApp({ planner: () => opts, log: silent(), metrics: new Registry() });
}

export interface Decoded {
  status: number;
  allowed?: boolean;
  warnings?: string[];
  patch?: PatchOp[];
  result?: { code: number; message: string };
  error?: string;
  uid?: string;
}

export function decode(status: number, body: string): Decoded {
  const json = JSON.parse(body) as {
    error?: string;
    response?: {
      uid: string;
      allowed: boolean;
      patch?: string;
      warnings?: string[];
      status?: { code: number; message: string };
    };
  };
  const r = json.response;
  if (!r) return { status, ...(json.error !== undefined ? { error: json.error } : {}) };
  const out: Decoded = { status, allowed: r.allowed, uid: r.uid };
  if (r.warnings) out.warnings = r.warnings;
  if (r.patch) out.patch = JSON.parse(Buffer.from(r.patch, 'base64').toString('utf8')) as PatchOp[];
  if (r.status) out.result = { code: r.status.code, message: r.status.message };
  return out;
}

/** Throws (naming the field) when the pod does not validate against the Kubernetes OpenAPI schema. */
export function validatePod(pod: unknown): void {
  new Pod(pod as ConstructorParameters<typeof Pod>[0]).validate();
}

export { applyPatch };

let gen = 0;
/** Puts a serving pair in `dir` the way the kubelet updates a mounted Secret (AtomicWriter). */
export function mountLikeKubelet(dir: string, pair: CertPair): void {
  // A fresh timestamped dir, then ..data flipped by rename; the files are symlinks through it.
  const ts = join(dir, `..${Date.now()}_${gen++}`);
  mkdirSync(ts);
  writeFileSync(join(ts, 'tls.crt'), pair.certPem);
  writeFileSync(join(ts, 'tls.key'), pair.keyPem);
  symlinkSync(ts, join(dir, '..data_tmp'));
  renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  for (const f of ['tls.crt', 'tls.key'])
    try {
      symlinkSync(join('..data', f), join(dir, f));
    } catch {
      // already linked through ..data
    }
}

/** The flags of a webhook on 127.0.0.1 (any free port) serving the pair cert-manager mounts in `dir`. */
export const certDirFlags = (dir: string, ...more: string[]): string[] => [
  ...['--port', '0', '--host', '127.0.0.1', '--tls-cert-dir', dir],
  ...more,
];
