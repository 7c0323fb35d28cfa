// Time is injected so decision code and retry loops are testable without real waiting.
export interface Clock {
  now(): number;
  /** Resolves after ms, or early (without throwing) when the signal aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      }
      signal?.addEventListener('abort', done, { once: true });
    }),
};

/** Resolves when check() returns a truthy value; rejects with the label after the deadline. */
export async function waitFor<T>(
  label: string,
  check: () => T | Promise<T>,
  opts: { timeoutMs: number; intervalMs?: number; clock?: Clock; signal?: AbortSignal },
): Promise<NonNullable<T>> {
  const clock = opts.clock ?? systemClock;
  const deadline = clock.now() + opts.timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      lastError = e;
    }
    if (opts.signal?.aborted) throw new Error(`aborted while waiting for ${label}`);
    if (clock.now() >= deadline) {
      const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`timed out after ${opts.timeoutMs} ms waiting for ${label}${why}`);
    }
    await clock.sleep(opts.intervalMs ?? 50, opts.signal);
  }
}
