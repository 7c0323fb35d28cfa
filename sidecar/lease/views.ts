// Each Lease as the feature's informer shows it, with the resourceVersions it showed lately and a
// signal at every change: what the verification after a write waits on instead of polling.
import type { Lease } from '../../shared/kube/types.ts';

export class LeaseViews {
  private readonly observed = new Map<string, Lease | undefined>();
  /** The resourceVersions each Lease's view showed lately, newest last: has it caught up with a write? */
  private readonly recentVersions = new Map<string, string[]>();
  /** Aborted, and replaced, at every change of a Lease's view. */
  private readonly changes = new Map<string, AbortController>();

  get(key: string): Lease | undefined {
    return this.observed.get(key);
  }

  /** The view of `key` changed to `lease`. */
  note(key: string, lease: Lease | undefined): void {
    this.observed.set(key, lease);
    const version = lease?.metadata?.resourceVersion;
    if (version) this.recentVersions.set(key, [...(this.recentVersions.get(key) ?? []), version].slice(-16));
    this.changes.get(key)?.abort();
    this.changes.set(key, new AbortController());
  }

  /** Aborted at the next change of `key`'s view. */
  nextChange(key: string): AbortSignal {
    const c = this.changes.get(key) ?? new AbortController();
    this.changes.set(key, c);
    return c.signal;
  }

  /** Whether `key`'s view has shown `version` lately (it has caught up with that write). */
  hasShown(key: string, version: string): boolean {
    return this.recentVersions.get(key)?.includes(version) ?? false;
  }
}
