// cert-manager mode: the mounted tls.crt/tls.key, reloaded when they change.
import { createHash } from 'node:crypto';
import { type FSWatcher, readFileSync, watch } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../shared/log.ts';
import type { Counter, Registry } from '../shared/metrics.ts';
import { certNotAfter } from '../shared/pki.ts';
import { checkPair, type ServingPair, type TlsSource } from './tls.ts';

export interface CertDirOptions {
  dir: string;
  log: Logger;
  /** How often the files are re-read besides the watch. */
  pollMs: number;
  metrics: Registry;
}

/**
 * Watches a cert-manager style directory (tls.crt, tls.key; kubelet swaps them atomically via
 * a ..data symlink). Polls as well as watching: inotify on projected volumes misses some swaps.
 */
export class CertDirReloader implements TlsSource {
  readonly kind = 'cert-dir';
  readonly dir: string;
  private readonly log: Logger;
  private readonly pollMs: number;
  private readonly reloads: Counter;
  private apply: (pair: ServingPair) => void = () => undefined;
  private digest = '';
  private rejected = '';
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(opts: CertDirOptions) {
    this.dir = opts.dir;
    this.log = opts.log;
    this.pollMs = opts.pollMs;
    this.reloads = opts.metrics.counter(
      'drainguard_webhook_cert_reloads_total',
      'Serving certificate changes seen in --tls-cert-dir, by result (applied, rejected).',
    );
  }

  private read(): ServingPair {
    return {
      cert: readFileSync(join(this.dir, 'tls.crt'), 'utf8'),
      key: readFileSync(join(this.dir, 'tls.key'), 'utf8'),
    };
  }

  private static digestOf(pair: ServingPair): string {
    return createHash('sha256').update(pair.cert).update(pair.key).digest('hex');
  }

  /** Reads the pair now; throws when it is missing or broken (at start-up that is fatal). */
  async load(): Promise<ServingPair> {
    const pair = this.read();
    checkPair(pair, this.dir);
    this.digest = CertDirReloader.digestOf(pair);
    return pair;
  }

  async start(apply: (pair: ServingPair) => void): Promise<void> {
    this.apply = apply;
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
      pair = this.read();
    } catch {
      return false;
    }
    const digest = CertDirReloader.digestOf(pair);
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
      this.reloads.inc({ result: 'rejected' });
      return false;
    }
    this.digest = digest;
    this.apply(pair);
    this.reloads.inc({ result: 'applied' });
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
