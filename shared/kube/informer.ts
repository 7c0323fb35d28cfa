import { Backoff } from '../backoff.ts';
import { type Clock, systemClock } from '../clock.ts';
import type { Logger } from '../log.ts';
import { type ApiError, isApiError, type KubeClient, retryDelay, WatchIdle } from './client.ts';
import type { KubeList, KubeObject } from './types.ts';

export interface InformerOptions {
  /** Collection path, e.g. /api/v1/nodes or /api/v1/namespaces/x/pods. */
  path: string;
  fieldSelector?: string;
  labelSelector?: string;
  log: Logger;
  clock?: Clock;
  /** Called with the full cache after the initial list and after every change. */
  onChange: (objects: ReadonlyMap<string, KubeObject>, event: { type: string; object?: KubeObject }) => void;
  onError?: (err: ApiError) => void;
  /** Silence after which a watch is re-opened (default WATCH_IDLE_MS; tests shorten it). */
  idleTimeoutMs?: number;
}

const keyOf = (o: KubeObject) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

/**
 * List + watch with a local cache that never gives up: any failure (410 Gone, 5xx, 429,
 * a dropped connection, a restarted API server) relists after a capped, jittered backoff.
 * client-node's informer stops on non-410 errors; this one is built not to.
 */
export class Informer {
  private readonly opts: InformerOptions;
  private readonly clock: Clock;
  private readonly cache = new Map<string, KubeObject>();
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;
  private synced = false;
  private failure: Error | undefined;
  private readonly client: KubeClient;
  restarts = 0;

  constructor(client: KubeClient, opts: InformerOptions) {
    this.client = client;
    this.opts = opts;
    this.clock = opts.clock ?? systemClock;
  }

  /** A first complete list arrived (stays true through later failures: the cache is kept). */
  get hasSynced(): boolean {
    return this.synced;
  }
  /**
   * The cache is the server's view as far as this informer can tell: the last list succeeded
   * and no list or watch has failed since. False while relisting after any failure, so code
   * that must not act on a stale or partial view (netfilter deletions) can wait.
   */
  get current(): boolean {
    return this.synced && this.failure === undefined;
  }
  /** The failure that made the view not current (undefined while current). */
  get lastError(): Error | undefined {
    return this.failure;
  }
  get objects(): ReadonlyMap<string, KubeObject> {
    return this.cache;
  }

  start(): void {
    this.running ??= this.loop();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.running;
  }

  private async loop(): Promise<void> {
    const backoff = new Backoff({ baseMs: 250, capMs: 10_000 });
    const signal = this.abort.signal;
    const selectors = { fieldSelector: this.opts.fieldSelector, labelSelector: this.opts.labelSelector };
    while (!signal.aborted) {
      try {
        const list = await this.client.get<KubeList>(this.opts.path, {
          query: selectors,
          timeoutMs: 15_000,
          signal,
        });
        this.cache.clear();
        for (const o of list.items ?? []) this.cache.set(keyOf(o), o);
        this.synced = true;
        this.failure = undefined;
        this.opts.onChange(this.cache, { type: 'SYNC' });
        let rv = list.metadata?.resourceVersion;
        // Keep watching from the last seen resourceVersion until the server says it is too old.
        // A watch that ends at once, again and again (a proxy closing it), must not spin.
        const quickEnds = new Backoff({ baseMs: 250, capMs: 10_000 });
        while (!signal.aborted) {
          const opened = this.clock.now();
          try {
            await this.client.watch<KubeObject>(
              this.opts.path,
              { ...selectors, resourceVersion: rv, timeoutSeconds: 240 + Math.floor(Math.random() * 60) },
              (ev) => {
                rv = ev.object.metadata?.resourceVersion ?? rv;
                if (ev.type === 'BOOKMARK') return;
                if (ev.type === 'DELETED') this.cache.delete(keyOf(ev.object));
                else this.cache.set(keyOf(ev.object), ev.object);
                backoff.reset();
                this.opts.onChange(this.cache, { type: ev.type, object: ev.object });
              },
              signal,
              this.opts.idleTimeoutMs,
            );
          } catch (e) {
            // Silent past the idle limit: re-open from rv at once; the API did not fail.
            if (!(e instanceof WatchIdle)) throw e;
            this.opts.log.info({ path: this.opts.path }, e.message);
            continue;
          }
          if (this.clock.now() - opened < 1_000) await this.clock.sleep(quickEnds.next(), signal);
          else quickEnds.reset();
        }
      } catch (e) {
        if (signal.aborted) break;
        this.restarts++;
        this.failure = e as Error;
        if (isApiError(e)) this.opts.onError?.(e);
        // 410: relist now. Otherwise back off, at least as long as the server's Retry-After.
        const wait = isApiError(e, 410) ? 0 : retryDelay(e, backoff.next());
        this.opts.log.warn(
          { path: this.opts.path, err: (e as Error).message, retryInMs: wait },
          'watch failed; relisting',
        );
        await this.clock.sleep(wait, signal);
      }
    }
  }
}
