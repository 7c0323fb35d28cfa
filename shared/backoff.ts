export interface BackoffOptions {
  baseMs: number;
  capMs: number;
  random?: () => number;
}

/**
 * Capped exponential backoff with jitter: attempt n waits a random time in
 * [base*2^n / 2, base*2^n], capped. Random is injected for tests.
 */
export class Backoff {
  private attempt = 0;
  private readonly opts: BackoffOptions;
  constructor(opts: BackoffOptions = { baseMs: 200, capMs: 10_000 }) {
    this.opts = opts;
  }
  next(): number {
    const exp = Math.min(this.opts.capMs, this.opts.baseMs * 2 ** this.attempt);
    this.attempt = Math.min(this.attempt + 1, 30);
    const r = (this.opts.random ?? Math.random)();
    return Math.round(exp / 2 + (exp / 2) * r);
  }
  reset(): void {
    this.attempt = 0;
  }
  get attempts(): number {
    return this.attempt;
  }
}

/**
 * Per key (an action kind, a request), "not before" after a failure: a caller that is asked again
 * on every reconcile (it acts on what it observes) must not turn a persistent error into a busy
 * loop. Each failure backs the key off further; a success clears it.
 */
export class RetryGate {
  private readonly gates = new Map<string, { backoff: Backoff; at: number }>();
  private readonly opts: BackoffOptions;
  private readonly now: () => number;
  constructor(now: () => number, opts: BackoffOptions = { baseMs: 200, capMs: 10_000 }) {
    this.now = now;
    this.opts = opts;
  }
  /** Whether `key` may be tried now. */
  open(key: string): boolean {
    const g = this.gates.get(key);
    return !g || this.now() >= g.at;
  }
  /** Records a failure; returns how long `key` stays closed and the attempt number. */
  failed(key: string): { waitMs: number; attempt: number } {
    const g = this.gates.get(key) ?? { backoff: new Backoff(this.opts), at: 0 };
    const waitMs = g.backoff.next();
    g.at = this.now() + waitMs;
    this.gates.set(key, g);
    return { waitMs, attempt: g.backoff.attempts };
  }
  succeeded(key: string): void {
    this.gates.delete(key);
  }
}

/** Thrown by retryUntil when the next wait would end past the deadline. */
export class DeadlineError extends Error {}

/**
 * Thrown by retryUntil when its signal aborted (the grace period after SIGTERM is spent, the
 * feature stopped): a DeadlineError, so callers that give up at a deadline give up here too.
 */
export class RetryAborted extends DeadlineError {}

/**
 * Calls `fn` until it succeeds, backing off between failures that `retryable` accepts; rethrows
 * any other failure, throws DeadlineError when the next wait would pass `deadline`, and
 * RetryAborted once `signal` aborts (after the failed call, or ending the wait): no call is made
 * after an abort.
 */
export async function retryUntil<T>(
  fn: () => Promise<T>,
  opts: {
    deadline: number;
    retryable: (e: unknown) => boolean;
    clock: { now(): number; sleep(ms: number, signal?: AbortSignal): Promise<void> };
    backoff?: BackoffOptions;
    signal?: AbortSignal;
    /** Called before each wait (logging). */
    onRetry?: (e: unknown, waitMs: number) => void;
    what?: string;
  },
): Promise<T> {
  const backoff = new Backoff(opts.backoff ?? { baseMs: 100, capMs: 2_000 });
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (!opts.retryable(e)) throw e;
      const what = opts.what ? `${opts.what}: ` : '';
      const aborted = () => new RetryAborted(`${what}aborted (${(e as Error).message})`);
      if (opts.signal?.aborted) throw aborted();
      const wait = backoff.next();
      if (opts.clock.now() + wait >= opts.deadline) throw new DeadlineError(`${what}${(e as Error).message}`);
      opts.onRetry?.(e, wait);
      await opts.clock.sleep(wait, opts.signal);
      if (opts.signal?.aborted) throw aborted();
    }
  }
}
