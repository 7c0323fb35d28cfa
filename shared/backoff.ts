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
