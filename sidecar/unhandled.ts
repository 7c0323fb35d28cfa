// A promise rejection nobody handles ends a Node process (the default, --unhandled-rejections=throw)
// with a stack trace on stderr and nothing in the JSON log. In the sidecar that is a background
// write or a listener that threw (issue 42: a malformed Node annotation made the status write
// throw outside its try): the container restarts, the handover in progress is dropped, and on the
// next start the same input ends it again. A bug there must cost the work that failed, not the
// process: the rejection is logged as an error, with its stack, and counted.
import type { Logger } from '../shared/log.ts';
import type { Counter } from '../shared/metrics.ts';

/** Installs the process-wide handler; returns the function that removes it again. */
export function logUnhandledRejections(log: Logger, counter?: Counter): () => void {
  const onRejection = (reason: unknown) => {
    counter?.inc();
    const err = reason instanceof Error ? reason : new Error(String(reason));
    log.error(
      { err: err.message, stack: err.stack },
      'unhandled promise rejection (a bug: please report it); the sidecar keeps running',
    );
  };
  process.on('unhandledRejection', onRejection);
  return () => process.off('unhandledRejection', onRejection);
}
