// Whether the API answers: one owner for the whole sidecar. Fed from every API call's outcome (the
// client's onResult, main.ts apiHealthReporter), read by every feature through ctx.api, and the one
// way to re-open the watches (they may sit on a lagging or stale API server). The drain state
// (drain/state.ts) holds drain and pod facts only.
import type { Clock } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';

export interface ApiHealthView {
  /** Epoch ms since which API calls have failed; undefined while the API answers. */
  readonly downSince: number | undefined;
  /** Epoch ms of the last API call that failed as if the API were down (kept after it answers). */
  readonly failedAt: number | undefined;
}

export class ApiHealth implements ApiHealthView {
  private since: number | undefined;
  private lastFailure: number | undefined;
  private readonly listeners = new Set<(h: ApiHealthView) => void>();
  private readonly clock: Clock;
  private readonly log: Logger | undefined;
  private readonly reopen: ((why: string) => void) | undefined;

  /** `reopenWatches`: the client's (every watch it holds ends and is opened again). */
  constructor(opts: { clock: Clock; log?: Logger; reopenWatches?: (why: string) => void }) {
    this.clock = opts.clock;
    this.log = opts.log;
    this.reopen = opts.reopenWatches;
  }

  get downSince(): number | undefined {
    return this.since;
  }

  get failedAt(): number | undefined {
    return this.lastFailure;
  }

  get up(): boolean {
    return this.since === undefined;
  }

  /**
   * One API call's outcome, seen `at` (now by default). Listeners hear of the API going down and
   * of it answering again; a further failure while down only moves `failedAt` (read on a tick).
   */
  result(ok: boolean, at = this.clock.now()): void {
    if (!ok) this.lastFailure = at;
    const since = ok ? undefined : (this.since ?? at);
    if (since === this.since) return;
    const was = this.since;
    this.since = since;
    if (since !== undefined)
      this.log?.warn({ since: new Date(since).toISOString() }, 'the API counts as down');
    else this.log?.info({ downForMs: at - (was ?? at) }, 'the API answers again');
    this.notify();
  }

  /**
   * The drain or pod facts changed while the API counts as down: they came from a watch cache
   * (nothing else answers then) and are the first news of it, so the outage (and the fail-safe's
   * grace) counts from now, not from its start. Otherwise a list arriving just before the API
   * answers again (a restart during an outage) would fire the fail-safe at once.
   */
  viewNews(): void {
    if (this.since === undefined) return;
    this.since = this.clock.now();
    this.notify();
  }

  /** The watches end and are opened again on new connections (they may sit on a stale server). */
  reopenWatches(why: string): void {
    this.reopen?.(why);
  }

  /** Every change of `downSince`; call the returned function to unsubscribe. */
  subscribe(fn: (h: ApiHealthView) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private notify(): void {
    for (const fn of this.listeners) fn(this);
  }
}
