// Serving-certificate sources. cert-manager mode reads the mounted tls.crt/tls.key and swaps
// them in with setSecureContext when they change (new handshakes get the new pair, running
// connections keep theirs). Self-managed mode keeps a CA and serving cert in a Secret shared
// by all replicas and patches its own MutatingWebhookConfiguration's caBundle.
import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { type FSWatcher, readFileSync, watch } from 'node:fs';
import { join } from 'node:path';
import { createSecureContext } from 'node:tls';
import type { Clock } from '../shared/clock.ts';
import { isApiError, type KubeClient } from '../shared/kube/client.ts';
import type { KubeObject } from '../shared/kube/types.ts';
import type { Logger } from '../shared/log.ts';
import { type CertPair, certNotAfter, createCA, createServingCert } from '../shared/pki.ts';

export interface ServingPair {
  cert: string;
  key: string;
}

/** Throws with a clear message when cert and key do not belong together or do not parse. */
export function checkPair(pair: ServingPair, where: string): void {
  try {
    const x = new X509Certificate(pair.cert);
    if (!x.checkPrivateKey(createPrivateKey(pair.key)))
      throw new Error('the key does not belong to the certificate');
    createSecureContext({ cert: pair.cert, key: pair.key });
  } catch (e) {
    throw new Error(`${where}: unusable certificate/key pair: ${(e as Error).message}`);
  }
}

/**
 * Watches a cert-manager style directory (tls.crt, tls.key; kubelet swaps them atomically via
 * a ..data symlink). Polls as well as watching: inotify on projected volumes misses some swaps.
 */
export class CertDirReloader {
  readonly dir: string;
  private readonly log: Logger;
  private readonly onChange: (pair: ServingPair) => void;
  private readonly onResult: (ok: boolean) => void;
  private readonly pollMs: number;
  private digest = '';
  private rejected = '';
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  reloads = 0;

  constructor(
    dir: string,
    onChange: (pair: ServingPair) => void,
    log: Logger,
    pollMs = 10_000,
    onResult: (ok: boolean) => void = () => undefined,
  ) {
    this.dir = dir;
    this.onChange = onChange;
    this.onResult = onResult;
    this.log = log;
    this.pollMs = pollMs;
  }

  /** Reads the pair now; throws when it is missing or broken (at start-up that is fatal). */
  load(): ServingPair {
    const pair = {
      cert: readFileSync(join(this.dir, 'tls.crt'), 'utf8'),
      key: readFileSync(join(this.dir, 'tls.key'), 'utf8'),
    };
    checkPair(pair, this.dir);
    this.digest = createHash('sha256').update(pair.cert).update(pair.key).digest('hex');
    return pair;
  }

  start(): void {
    try {
      this.watcher = watch(this.dir, () => this.check());
      this.watcher.on('error', () => undefined);
    } catch {
      // polling alone still works
    }
    this.timer = setInterval(() => this.check(), this.pollMs);
    this.timer.unref();
  }

  /** Re-reads the files; a half-written or mismatched pair is skipped (the old one keeps serving). */
  check(): boolean {
    let pair: ServingPair;
    try {
      pair = {
        cert: readFileSync(join(this.dir, 'tls.crt'), 'utf8'),
        key: readFileSync(join(this.dir, 'tls.key'), 'utf8'),
      };
    } catch {
      return false;
    }
    const digest = createHash('sha256').update(pair.cert).update(pair.key).digest('hex');
    if (digest === this.digest || digest === this.rejected) return false;
    try {
      checkPair(pair, this.dir);
    } catch (e) {
      // Remembered so a broken pair is reported once, not on every poll.
      this.rejected = digest;
      this.log.warn(
        { err: (e as Error).message },
        'new serving certificate not usable yet; keeping the old one',
      );
      this.onResult(false);
      return false;
    }
    this.digest = digest;
    this.onChange(pair);
    this.onResult(true);
    this.reloads++;
    this.log.info(
      { dir: this.dir, notAfter: new Date(certNotAfter(pair.cert)).toISOString() },
      'serving certificate reloaded',
    );
    return true;
  }

  stop(): void {
    this.watcher?.close();
    if (this.timer) clearInterval(this.timer);
  }
}

export interface SelfManagedOptions {
  client: KubeClient;
  namespace: string;
  secretName: string;
  webhookConfigName: string;
  /** DNS names for the serving certificate (the Service's names). */
  dnsNames: string[];
  ipAddresses?: string[];
  caDays?: number;
  servingDays?: number;
  log: Logger;
  clock: Clock;
}

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
 * caBundle of every webhook in the configuration hold the current (and any previous) CA.
 */
export class SelfManagedTls {
  private readonly o: Required<SelfManagedOptions>;
  material: TlsMaterial | undefined;

  constructor(opts: SelfManagedOptions) {
    this.o = { ipAddresses: [], caDays: 3650, servingDays: 365, ...opts };
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
