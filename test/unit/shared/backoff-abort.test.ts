// On SIGTERM the sidecar aborts its retry loops when the grace period is spent: an aborted
// retryUntil must stop trying, not keep calling until its own (later) deadline.
import t from 'tap';
import { DeadlineError, RetryAborted, retryUntil } from '../../../shared/backoff.ts';

/** Time moves only when somebody sleeps; a sleep whose signal is aborted ends at once (1 ms). */
const steppingClock = () => {
  const c = {
    t: 0,
    now: () => c.t,
    sleep: async (ms: number, signal?: AbortSignal) => {
      c.t += signal?.aborted ? 1 : ms;
    },
  };
  return c;
};

t.test('an aborted retryUntil stops after the failing call, before its deadline', async (t) => {
  const clock = steppingClock();
  const abort = new AbortController();
  let calls = 0;
  const loop = retryUntil(
    async () => {
      calls++;
      if (calls === 3) abort.abort();
      throw new Error('API unreachable');
    },
    {
      deadline: 5_000,
      retryable: () => true,
      clock,
      signal: abort.signal,
      what: 'read Lease',
      backoff: { baseMs: 100, capMs: 1000, random: () => 1 },
    },
  );
  await t.rejects(loop, { constructor: RetryAborted, message: 'read Lease: aborted (API unreachable)' });
  t.equal(calls, 3, 'no call after the abort');
  t.ok(clock.now() < 5_000, `stopped at ${clock.now()} ms`);
});

t.test('an abort during the wait ends the loop without another call; it is a DeadlineError', async (t) => {
  const abort = new AbortController();
  let calls = 0;
  let sleeps = 0;
  const clock = {
    now: () => sleeps * 1000,
    sleep: async (_ms: number, signal?: AbortSignal) => {
      sleeps++;
      abort.abort();
      t.ok(signal?.aborted, 'the wait is given the signal');
    },
  };
  const e = await retryUntil(
    async () => {
      calls++;
      throw new Error('busy');
    },
    { deadline: 60_000, retryable: () => true, clock, signal: abort.signal },
  ).catch((err: unknown) => err);
  t.ok(e instanceof DeadlineError, 'callers that give up at a deadline give up here too');
  t.equal(calls, 1);
});

t.test('a signal aborted before the first call: one call is still made (it may succeed)', async (t) => {
  const abort = new AbortController();
  abort.abort();
  const v = await retryUntil(async () => 'ok', {
    deadline: 1,
    retryable: () => true,
    clock: steppingClock(),
    signal: abort.signal,
  });
  t.equal(v, 'ok');
});
