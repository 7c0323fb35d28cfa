// Self-managed mode: a CA and serving certificate of the webhook's own, kept in a Secret shared by
// all replicas, trusted through the caBundle of its own MutatingWebhookConfiguration, and rotated
// before they expire.
import { X509Certificate } from 'node:crypto';
import { retryUntil } from '../shared/backoff.ts';
import type { Clock } from '../shared/clock.ts';
import { isApiError } from '../shared/kube/api-error.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import type { KubeObject } from '../shared/kube/types.ts';
import type { Logger } from '../shared/log.ts';
import { type CertPair, certNotAfter, createCA, createServingCert } from '../shared/pki.ts';
import { checkPair, type ServingPair, type TlsSource } from './tls.ts';

export interface SelfManagedOptions {
  client: KubeClient;
  namespace: string;
  secretName: string;
  webhookConfigName: string;
  /** DNS names for the serving certificate (the Service's names). */
  dnsNames: string[];
  ipAddresses: string[];
  caDays: number;
  servingDays: number;
  /** How often the Secret is re-read and rotated. */
  rotateCheckMs: number;
  log: Logger;
  clock: Clock;
}

/** The names a Service answers to in the cluster, for the serving certificate's SANs. */
export const serviceDnsNames = (service: string, namespace: string): string[] => [
  service,
  `${service}.${namespace}`,
  `${service}.${namespace}.svc`,
  `${service}.${namespace}.svc.cluster.local`,
];

/** caBundle retries: quickly at first (the configuration is often applied just after the pod). */
const CA_BUNDLE_BACKOFF = { baseMs: 500, capMs: 30_000 };

const servingPair = (m: TlsMaterial): ServingPair => ({ cert: m.serving.certPem, key: m.serving.keyPem });

interface SecretObj extends KubeObject {
  data?: Record<string, string>;
  type?: string;
}

export interface TlsMaterial {
  ca: CertPair;
  /** Every CA the clients should trust: the current one first, a previous one during rotation. */
  caBundle: string;
  serving: CertPair;
}

const DAY = 86_400_000;
const b64 = (s: string) => Buffer.from(s).toString('base64');
const unb64 = (s: string | undefined) => (s ? Buffer.from(s, 'base64').toString('utf8') : '');

function splitPems(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}

/** What a stored pair needs: nothing, a new serving cert, or a new CA (and so a new serving cert). */
export function rotationNeeded(
  m: TlsMaterial,
  want: { dnsNames: string[]; ipAddresses: string[]; caDays: number; servingDays: number },
  now: number,
): 'none' | 'serving' | 'ca' {
  // Rotate with a third of the lifetime left: rotation has time to retry and reach every replica.
  const caLeft = certNotAfter(m.ca.certPem) - now;
  if (caLeft < (want.caDays * DAY) / 3 || caLeft < 2 * want.servingDays * DAY) return 'ca';
  const x = new X509Certificate(m.serving.certPem);
  if (!x.checkIssued(new X509Certificate(m.ca.certPem))) return 'serving';
  if (certNotAfter(m.serving.certPem) - now < (want.servingDays * DAY) / 3) return 'serving';
  const san = x.subjectAltName ?? '';
  const names = new Set(san.split(', ').map((s) => s.replace(/^DNS:|^IP Address:/, '')));
  if (![...want.dnsNames, ...want.ipAddresses].every((n) => names.has(n))) return 'serving';
  return 'none';
}

/**
 * Self-managed TLS: create-or-reuse the Secret (optimistic concurrency: create, or update with
 * the read resourceVersion; a 409 re-reads and converges on what the winner wrote), then make the
 * caBundle of every webhook in the configuration hold the current (and any previous) CA. Once
 * serving, it keeps trying to set the caBundle until it is set, and checks for rotation.
 */
export class SelfManagedTls implements TlsSource {
  readonly kind = 'self-managed';
  private readonly o: SelfManagedOptions;
  private material: TlsMaterial | undefined;
  private readonly stopping = new AbortController();

  constructor(opts: SelfManagedOptions) {
    this.o = opts;
  }

  async load(): Promise<ServingPair> {
    return servingPair(await this.ensureSecret());
  }

  async start(apply: (pair: ServingPair) => void): Promise<void> {
    const first = this.material;
    if (!first) throw new Error('SelfManagedTls.start() before load()');
    void this.rotate(servingPair(first), apply);
    await this.setCaBundle(first.caBundle);
  }

  stop(): void {
    this.stopping.abort();
  }

  /**
   * The configuration may be created after this pod starts (one `kubectl apply`): serve anyway and
   * keep trying to set its caBundle. Resolves after the first try; retries go on in the background.
   */
  private async setCaBundle(caBundle: string): Promise<void> {
    const signal = this.stopping.signal;
    let tried: () => void = () => undefined;
    const firstTry = new Promise<void>((resolve) => {
      tried = resolve;
    });
    retryUntil(
      async () => {
        if (signal.aborted) throw new Error('stopped');
        try {
          return await this.patchCaBundle(caBundle);
        } finally {
          tried();
        }
      },
      {
        deadline: Number.POSITIVE_INFINITY,
        retryable: () => !signal.aborted,
        clock: this.o.clock,
        backoff: CA_BUNDLE_BACKOFF,
        signal,
        onRetry: (e, waitMs) =>
          this.o.log.warn({ err: (e as Error).message, retryInMs: waitMs }, 'caBundle not set yet; retrying'),
      },
    ).catch(() => undefined);
    await firstTry;
  }

  /** Every rotateCheckMs: converge the Secret and caBundle; a new serving pair is applied. */
  private async rotate(served: ServingPair, apply: (pair: ServingPair) => void): Promise<void> {
    const signal = this.stopping.signal;
    let current = served;
    for (;;) {
      await this.o.clock.sleep(this.o.rotateCheckMs, signal);
      if (signal.aborted) return;
      try {
        const next = servingPair(await this.sync());
        if (next.cert !== current.cert) {
          current = next;
          apply(next);
        }
      } catch (e) {
        this.o.log.warn({ err: (e as Error).message }, 'TLS rotation check failed; retrying later');
      }
    }
  }

  private get secretPath(): string {
    return `/api/v1/namespaces/${this.o.namespace}/secrets/${this.o.secretName}`;
  }

  private fromSecret(s: SecretObj): TlsMaterial | undefined {
    const d = s.data ?? {};
    // The overlay ships the Secret empty (so the webhook needs no `create`): nothing stored yet.
    if (Object.keys(d).length === 0) return undefined;
    const m = {
      ca: { certPem: unb64(d['ca.crt']), keyPem: unb64(d['ca.key']) },
      caBundle: unb64(d['ca-bundle.crt']) || unb64(d['ca.crt']),
      serving: { certPem: unb64(d['tls.crt']), keyPem: unb64(d['tls.key']) },
    };
    try {
      checkPair({ cert: m.serving.certPem, key: m.serving.keyPem }, `Secret ${this.o.secretName}`);
      checkPair({ cert: m.ca.certPem, key: m.ca.keyPem }, `Secret ${this.o.secretName} CA`);
    } catch (e) {
      this.o.log.warn({ err: (e as Error).message }, 'stored TLS material unusable; regenerating');
      return undefined;
    }
    return m;
  }

  private toSecretData(m: TlsMaterial): Record<string, string> {
    return {
      'ca.crt': b64(m.ca.certPem),
      'ca.key': b64(m.ca.keyPem),
      'ca-bundle.crt': b64(m.caBundle),
      'tls.crt': b64(m.serving.certPem),
      'tls.key': b64(m.serving.keyPem),
    };
  }

  private generate(prev: TlsMaterial | undefined, what: 'ca' | 'serving', now: number): TlsMaterial {
    const ca = what === 'ca' || !prev ? createCA('drainguard-webhook-ca', this.o.caDays, now) : prev.ca;
    const serving = createServingCert(
      ca,
      { dnsNames: this.o.dnsNames, ipAddresses: this.o.ipAddresses, days: this.o.servingDays },
      now,
    );
    // Keep the previous CA(s) that are still valid, so callers that cached the old bundle keep working.
    const keep = prev
      ? splitPems(prev.caBundle).filter((p) => p.trim() !== ca.certPem.trim() && certNotAfter(p) > now)
      : [];
    const caBundle = [ca.certPem.trim(), ...keep.slice(0, 1)].join('\n') + '\n';
    return { ca, caBundle, serving };
  }

  /** Converges the Secret; returns the material every replica now shares. */
  async ensureSecret(): Promise<TlsMaterial> {
    const want = {
      dnsNames: this.o.dnsNames,
      ipAddresses: this.o.ipAddresses,
      caDays: this.o.caDays,
      servingDays: this.o.servingDays,
    };
    for (let attempt = 0; attempt < 10; attempt++) {
      const now = this.o.clock.now();
      let existing: SecretObj | undefined;
      try {
        existing = await this.o.client.get<SecretObj>(this.secretPath, { retries: 3 });
      } catch (e) {
        if (!isApiError(e, 404)) throw e;
      }
      const stored = existing ? this.fromSecret(existing) : undefined;
      const need = stored ? rotationNeeded(stored, want, now) : 'ca';
      if (stored && need === 'none') {
        this.material = stored;
        return stored;
      }
      const next = this.generate(stored, need === 'none' ? 'ca' : need, now);
      try {
        if (!existing) {
          await this.o.client.create(`/api/v1/namespaces/${this.o.namespace}/secrets`, {
            apiVersion: 'v1',
            kind: 'Secret',
            type: 'Opaque',
            metadata: {
              name: this.o.secretName,
              namespace: this.o.namespace,
              labels: { 'app.kubernetes.io/name': 'drainguard', 'app.kubernetes.io/component': 'webhook' },
            },
            data: this.toSecretData(next),
          });
        } else {
          await this.o.client.replace(this.secretPath, {
            ...existing,
            type: existing.type ?? 'Opaque',
            data: this.toSecretData(next),
          });
        }
        this.o.log.info({ secret: this.o.secretName, rotated: need }, 'webhook TLS material written');
        this.material = next;
        return next;
      } catch (e) {
        // Another replica won the race: read what it wrote and use that.
        if (isApiError(e, 409)) continue;
        throw e;
      }
    }
    throw new Error(`Secret ${this.o.namespace}/${this.o.secretName}: too many conflicting writers`);
  }

  /** Sets caBundle on every webhook of the configuration (read-modify-write with resourceVersion). */
  async patchCaBundle(caBundle: string): Promise<boolean> {
    const path = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${this.o.webhookConfigName}`;
    const wanted = b64(caBundle);
    for (let attempt = 0; attempt < 10; attempt++) {
      const cfg = await this.o.client.get<
        KubeObject & { webhooks?: { clientConfig?: { caBundle?: string } }[] }
      >(path, { retries: 3 });
      const hooks = cfg.webhooks ?? [];
      if (hooks.every((h) => h.clientConfig?.caBundle === wanted)) return false;
      for (const h of hooks) h.clientConfig = { ...(h.clientConfig ?? {}), caBundle: wanted };
      try {
        await this.o.client.replace(path, cfg);
        this.o.log.info({ configuration: this.o.webhookConfigName }, 'caBundle updated');
        return true;
      } catch (e) {
        if (isApiError(e, 409)) continue;
        throw e;
      }
    }
    throw new Error(`MutatingWebhookConfiguration ${this.o.webhookConfigName}: too many conflicting writers`);
  }

  /** Secret first, then caBundle: the bundle must trust the CA before any replica serves its cert. */
  async sync(): Promise<TlsMaterial> {
    const m = await this.ensureSecret();
    await this.patchCaBundle(m.caBundle);
    return m;
  }
}
