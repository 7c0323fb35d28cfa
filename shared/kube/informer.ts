import { Backoff } from '../backoff.ts';
import { type Clock, systemClock } from '../clock.ts';
import type { Logger } from '../log.ts';
import { type ApiError, isApiError, retryDelay, WatchIdle } from './api-error.ts';
import type { KubeClient } from './client.ts';
import { listPaged } from './paged-list.ts';
import type { KubeList, KubeObject } from './types.ts';

export interface InformerOptions {
  /** Collection path, e.g. /api/v1/nodes or /api/v1/namespaces/x/pods. */
  path: string;
  fieldSelector?: string;
  labelSelector?: string;
  log: Logger;
  clock?: Clock;
  /**
   * Called with the full cache after every list (type SYNC), after every change (the watch
   * event's type), and when a watch resumed after a failure (type RESUMED: the cache is
   * unchanged, the view is current again).
   */
  onChange: (objects: ReadonlyMap<string, KubeObject>, event: { type: string; object?: KubeObject }) => void;
  onError?: (err: ApiError) => void;
  /** Silence after which a watch is re-opened (default WATCH_IDLE_MS; tests shorten it). */
  idleTimeoutMs?: number;
  /** For the watch timeout's jitter (tests). */
  random?: () => number;
  /**
   * List in pages of this many objects (`limit`/`continue`, paged-list.ts) instead of one answer
   * from the watch cache: for collections that grow with the cluster (every Node). Such lists are
   * consistent reads from etcd, page by page: a 1.20 API server ignores `limit` with
   * `resourceVersion=0`.
   */
  pageSize?: number;
  /**
   * Keeps only what the caller reads of each object (listed or watched) before it is cached: a
   * cache of thousands of Nodes then holds names and a few fields, not ~13 KiB each.
   */
  trim?: (o: KubeObject) => KubeObject;
  /**
   * With pageSize: each page's (trimmed) objects as they arrive, before the list completes (and
   * before the SYNC that replaces the cache): a caller whose decision a part can already prove
   * need not wait for thousands of objects.
   */
  onListPage?: (objects: KubeObject[]) => void;
  /** With pageSize: a page with no byte after this long is asked again on a new connection. */
  pageHedgeAfterMs?: number;
}

/** What an informer asked of the API server and heard back, since it started. */
export interface InformerStats {
  lists: number;
  /** Watches the server accepted (200). */
  watches: number;
  /** Watches answered 410 Gone: the resourceVersion had left the watch cache (each one re-lists). */
  gone: number;
  bookmarks: number;
  /** Watches ended by us after the idle limit (re-opened from the same resourceVersion). */
  idleReopens: number;
}

/** What to do after a watch ended with an error. */
export type WatchRecovery = 'reopen' | 'rewatch' | 'relist';

/**
 * After a watch failed: only a resourceVersion the server no longer has needs a new list
 * (410 Gone / "too old resource version"; "too large resource version", which a re-watch can
 * never get past). Anything else — a dropped connection, a restarted API server, 5xx, 429, a
 * refused credential — re-watches from the last resourceVersion after a backoff: the server
 * replays what changed since. Silence past the idle limit re-opens at once: no failure at all.
 */
export function recoveryAfter(e: unknown): WatchRecovery {
  if (e instanceof WatchIdle) return 'reopen';
  if (isApiError(e, 410)) return 'relist';
  if (isApiError(e) && /too large resource ?version/i.test(e.detail)) return 'relist';
  return 'rewatch';
}

/**
 * The server-side timeout of one watch, in seconds: 5 to 10 min, random like client-go's
 * reflector, so that the watches of many sidecars do not all end (and re-open) together.
 */
export function watchTimeoutSeconds(random: () => number = Math.random): number {
  return 300 + Math.floor(random() * 300);
}

const keyOf = (o: KubeObject) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

/**
 * List + watch with a local cache that never gives up. A watch that fails or ends is re-opened
 * from the last resourceVersion (after a capped, jittered backoff when it failed); only a 410
 * lists again. Lists are served from the API server's watch cache, like the kubelet's.
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
  /** Where the next watch starts: the last list's, event's or bookmark's resourceVersion. */
  private version: string | undefined;
  private readonly client: KubeClient;
  /** Failures (a list or watch that failed); idle re-opens and watches the server ended are none. */
  restarts = 0;
  readonly stats: InformerStats = { lists: 0, watches: 0, gone: 0, bookmarks: 0, idleReopens: 0 };

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
   * or a watch resumed from the last resourceVersion, and nothing failed since. False from a
   * failure until then, so code that must not act on a stale or partial view (netfilter
   * deletions) can wait.
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

  private get selectors() {
    return { fieldSelector: this.opts.fieldSelector, labelSelector: this.opts.labelSelector };
  }

  /** Replaces the cache with a list; returns its resourceVersion. */
  private async list(signal: AbortSignal): Promise<string | undefined> {
    const { pageSize, trim } = this.opts;
    let items: KubeObject[];
    let version: string | undefined;
    if (pageSize !== undefined) {
      const paged = await listPaged(this.client, this.opts.path, {
        ...this.selectors,
        pageSize,
        trim,
        signal,
        onPage: this.opts.onListPage,
        hedgeAfterMs: this.opts.pageHedgeAfterMs,
      });
      items = paged.items;
      version = paged.resourceVersion;
    } else {
      // resourceVersion=0: served from the API server's watch cache, not read from etcd (a quorum
      // read decodes every object of the resource, whatever the selector). The first list too:
      // the watch that follows streams every change after the list's version, so the view
      // converges within the cache's lag (milliseconds), as the kubelet's does. A decision that
      // must not act on even that reads its narrow object consistently (netfilter re-reads its
      // node's pods before deleting; Lease writes carry a resourceVersion precondition).
      const list = await this.client.get<KubeList>(this.opts.path, {
        query: { ...this.selectors, resourceVersion: '0' },
        timeoutMs: 15_000,
        signal,
      });
      items = trim ? (list.items ?? []).map(trim) : (list.items ?? []);
      version = list.metadata?.resourceVersion;
    }
    this.stats.lists++;
    this.cache.clear();
    for (const o of items) this.cache.set(keyOf(o), o);
    this.synced = true;
    this.failure = undefined;
    this.opts.onChange(this.cache, { type: 'SYNC' });
    return version;
  }

  /** One watch from the last resourceVersion until it ends; every event moves that version on. */
  private async watchOnce(signal: AbortSignal, progress: () => void): Promise<void> {
    await this.client.watch<KubeObject>(
      this.opts.path,
      {
        ...this.selectors,
        resourceVersion: this.version,
        timeoutSeconds: watchTimeoutSeconds(this.opts.random),
      },
      (ev) => {
        // Bookmarks carry only a resourceVersion: the server's progress, also for a quiet watch.
        this.version = ev.object.metadata?.resourceVersion ?? this.version;
        progress();
        if (ev.type === 'BOOKMARK') {
          this.stats.bookmarks++;
          return;
        }
        const object = this.opts.trim ? this.opts.trim(ev.object) : ev.object;
        if (ev.type === 'DELETED') this.cache.delete(keyOf(object));
        else this.cache.set(keyOf(object), object);
        this.opts.onChange(this.cache, { type: ev.type, object });
      },
      signal,
      {
        ...(this.opts.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: this.opts.idleTimeoutMs }),
        onOpen: () => {
          this.stats.watches++;
          // The server accepted the watch from our version: what changed since follows, in order.
          if (this.failure === undefined) return;
          this.failure = undefined;
          this.opts.onChange(this.cache, { type: 'RESUMED' });
        },
      },
    );
  }

  private async loop(): Promise<void> {
    const signal = this.abort.signal;
    // After failures (a 410 too: a list that is at once too old again must not spin).
    const failures = new Backoff({ baseMs: 250, capMs: 10_000 });
    // A watch the server ends at once, again and again (a proxy closing it), must not spin.
    const quickEnds = new Backoff({ baseMs: 250, capMs: 10_000 });
    let listed = false;
    while (!signal.aborted) {
      if (!listed) {
        try {
          this.version = await this.list(signal);
          listed = true;
        } catch (e) {
          if (signal.aborted) break;
          await this.failed(e, 'list failed; listing again', retryDelay(e, failures.next()));
        }
        continue;
      }
      const opened = this.clock.now();
      let ended: unknown;
      try {
        await this.watchOnce(signal, () => failures.reset());
      } catch (e) {
        ended = e;
      }
      if (signal.aborted) break;
      if (ended === undefined) {
        // The server ended it (its timeoutSeconds, or a proxy): watch on from where it stopped.
        if (this.clock.now() - opened < 1_000) await this.clock.sleep(quickEnds.next(), signal);
        else quickEnds.reset();
        continue;
      }
      const next = recoveryAfter(ended);
      if (next === 'reopen') {
        this.stats.idleReopens++;
        this.opts.log.info({ path: this.opts.path }, (ended as Error).message);
        continue;
      }
      if (next === 'relist') {
        if (isApiError(ended, 410)) this.stats.gone++;
        listed = false;
      }
      const what = next === 'relist' ? 'watch failed; relisting' : 'watch failed; watching again';
      await this.failed(ended, what, retryDelay(ended, failures.next()));
    }
  }

  /** Records a failure (the view is not current until a list or watch succeeds), then waits. */
  private async failed(e: unknown, what: string, waitMs: number): Promise<void> {
    this.restarts++;
    this.failure = e as Error;
    if (isApiError(e)) this.opts.onError?.(e);
    this.opts.log.warn({ path: this.opts.path, err: (e as Error).message, retryInMs: waitMs }, what);
    await this.clock.sleep(waitMs, this.abort.signal);
  }
}
