// A clock for unit tests whose timers matter: time moves only in advance(), and every sleeper
// due by then wakes in order, each after what it started has settled. No real waiting.
import type { Clock } from '../../shared/clock.ts';

/** A few turns of the event loop: what a woken sleeper started runs until it awaits again. */
export const settle = async (): Promise<void> => {
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
};

export class VirtualClock implements Clock {
  t: number;
  private readonly start: number;
  private timers: { at: number; wake: () => void }[] = [];
  constructor(start: number) {
    this.t = start;
    this.start = start;
  }
  now(): number {
    return this.t;
  }
  /** Sleepers not yet woken (a test checks that a timer was cancelled). */
  get pending(): number {
    return this.timers.length;
  }
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (ms <= 0 || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = { at: this.t + ms, wake: () => resolve() };
      this.timers.push(timer);
      signal?.addEventListener(
        'abort',
        () => {
          this.timers = this.timers.filter((x) => x !== timer);
          resolve();
        },
        { once: true },
      );
    });
  }
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      await settle();
      const next = this.timers.filter((x) => x.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      this.timers = this.timers.filter((x) => x !== next);
      this.t = next.at;
      next.wake();
    }
    this.t = end;
    await settle();
  }
  /** Advance to an offset from the start. */
  async to(offsetMs: number): Promise<void> {
    await this.advance(this.start + offsetMs - this.t);
  }
}
