// How the DrainWatcher (watcher.ts) publishes a new DrainState, pure: when the fail-safe's grace
// counts from, and whether the change wakes the listeners and is logged.
import { type DrainState, sameDrainState } from './state.ts';

/**
 * The view changed while the API counts as down: it came from a watch cache (nothing else
 * answers then) and is the first news of it, so the fail-safe's grace counts from now, not
 * from the outage's start. Otherwise a list arriving just before the API answers again (a
 * restart during an outage) would fire the fail-safe at once.
 */
export function viewNewsWhileDown(prev: DrainState, next: DrainState): boolean {
  return (
    next.apiDownSince !== undefined &&
    (prev.draining !== next.draining || prev.terminating !== next.terminating || prev.synced !== next.synced)
  );
}

/**
 * What a new DrainState is: `same` (nothing to do), `failure-time` (recorded only), `quiet`
 * (listeners woken) or `logged` (listeners woken, and a log line).
 */
export function drainStateChange(
  prev: DrainState,
  next: DrainState,
): 'same' | 'failure-time' | 'quiet' | 'logged' {
  if (sameDrainState(prev, next)) return 'same';
  // Only the time of the last failure moved (every failed request while the API is down):
  // recorded, nobody woken for it (the L2 loop reads it on its next tick).
  if (sameDrainState(prev, { ...next, apiFailedAt: prev.apiFailedAt })) return 'failure-time';
  return prev.draining !== next.draining ||
    prev.terminating !== next.terminating ||
    prev.apiDownSince !== next.apiDownSince
    ? 'logged'
    : 'quiet';
}
