// The lab's last resort: what a test process started (servers, namespaces, clusters) must not
// outlive it. Cleanups run synchronously at exit (nothing asynchronous runs then).
const registered = new Set<() => void>();
let exitOnSignals = false;

/**
 * Runs `cleanup` when the process exits (registered once however often asked). `signals`: Ctrl-C
 * and SIGTERM exit (130) through the cleanups instead of killing the process past them.
 */
export function atExit(cleanup: () => void, opts: { signals?: boolean } = {}): void {
  if (!registered.has(cleanup)) {
    registered.add(cleanup);
    process.on('exit', cleanup);
  }
  if (opts.signals && !exitOnSignals) {
    exitOnSignals = true;
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => process.exit(130));
  }
}

/** Runs `fn`, ignoring a failure: at exit, what is already gone is fine. */
export function quietly(fn: () => void): void {
  try {
    fn();
  } catch {}
}
