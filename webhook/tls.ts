// Serving-certificate sources: where the HTTPS server's pair comes from and how it is kept
// current. Each new pair is swapped in with setSecureContext: new handshakes get it, running
// connections keep theirs. Two sources: cert-manager's mounted files (tls-cert-dir.ts) and a CA
// of the webhook's own, kept in a Secret shared by all replicas (tls-self-managed.ts).
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { createSecureContext } from 'node:tls';
import type { Registry } from '../shared/metrics.ts';
import { certNotAfter } from '../shared/pki.ts';

export interface ServingPair {
  cert: string;
  key: string;
}

export interface TlsSource {
  /** For the start-up log. */
  readonly kind: 'cert-dir' | 'self-managed';
  /** The pair to serve first; throws when there is none usable (fatal at start). */
  load(): Promise<ServingPair>;
  /**
   * Once the server listens: keeps the pair current, handing each new one to `apply`. Resolves
   * when the source has done what start-up waits for; the rest continues in the background.
   */
  start(apply: (pair: ServingPair) => void): Promise<void>;
  stop(): void;
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
 * The source, exporting the notAfter of the pair it hands out to be served (Unix seconds, label
 * `source`): in both modes, what clients get, whoever renews it — cert-manager can renew a
 * Secret that the webhook then fails to load; a self-managed rotation can fail for days.
 */
export function observeServing(source: TlsSource, metrics: Registry): TlsSource {
  const expiry = metrics.gauge(
    'drainguard_webhook_certificate_expiration_timestamp_seconds',
    'When the serving certificate this webhook serves expires (Unix seconds), by TLS source (cert-dir, self-managed).',
  );
  const served = (pair: ServingPair) => {
    expiry.set({ source: source.kind }, certNotAfter(pair.cert) / 1000);
    return pair;
  };
  return {
    kind: source.kind,
    load: async () => served(await source.load()),
    start: (apply) => source.start((pair) => apply(served(pair))),
    stop: () => source.stop(),
  };
}
