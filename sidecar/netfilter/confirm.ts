// The two-pass rule: act only on what was stale on consecutive passes at least confirmMs apart.

/**
 * Tracks, per key, when its current unbroken run of "stale" sightings began. A pass that
 * does not see a key stale ends its run; passes closer together than confirmMs keep the run
 * going but cannot confirm it (event-triggered passes in a burst do not count twice).
 */
export class ConfirmationTracker {
  readonly confirmMs: number;
  private readonly since = new Map<string, number>();

  constructor(confirmMs: number) {
    if (!(confirmMs >= 0)) throw new Error(`confirmMs must be >= 0, got ${confirmMs}`);
    this.confirmMs = confirmMs;
  }

  /** Records one pass; returns the keys confirmed by it. */
  observe(now: number, staleKeys: Iterable<string>): Set<string> {
    const seen = new Set(staleKeys);
    for (const k of this.since.keys()) if (!seen.has(k)) this.since.delete(k);
    const confirmed = new Set<string>();
    for (const k of seen) {
      const first = this.since.get(k);
      if (first === undefined) this.since.set(k, now);
      else if (now - first >= this.confirmMs) confirmed.add(k);
    }
    return confirmed;
  }

  /** Deleted keys start over: a rule re-added later needs two fresh sightings. */
  forget(keys: Iterable<string>): void {
    for (const k of keys) this.since.delete(k);
  }

  /** When the key's current run of stale sightings began (undefined: not stale). */
  firstSeen(key: string): number | undefined {
    return this.since.get(key);
  }

  /** Keys seen stale but not yet confirmed, with the time confirmation becomes possible. */
  pending(): { key: string; confirmableAt: number }[] {
    return [...this.since].map(([key, t]) => ({ key, confirmableAt: t + this.confirmMs }));
  }
}
