// How the DrainWatcher (watcher.ts) publishes a new DrainState, pure: whether the change wakes the
// listeners and is logged, and whether it is news of the drain (which, while the API counts as
// down, restarts the outage's clock: api-health.ts viewNews).
import { type DrainState, sameDrainState } from './state.ts';

/** The drain or pod facts changed (what a watch cache can show while nothing else answers). */
export function viewNews(prev: DrainState, next: DrainState): boolean {
  return (
    prev.draining !== next.draining || prev.terminating !== next.terminating || prev.synced !== next.synced
  );
}

/** What a new DrainState is: `same` (nothing to do), `quiet` (listeners woken) or `logged` (and a log line). */
export function drainStateChange(prev: DrainState, next: DrainState): 'same' | 'quiet' | 'logged' {
  if (sameDrainState(prev, next)) return 'same';
  return prev.draining !== next.draining || prev.terminating !== next.terminating ? 'logged' : 'quiet';
}
