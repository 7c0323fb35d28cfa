import t from 'tap';
import { DeadlineError, RetryGate, retryUntil } from '../../../shared/backoff.ts';

const fakeClock = () => {
  let now = 0;
  return {
    now: () => now,
    sleep: async (ms: number) => {
      now += ms;
    },
    advance: (ms: number) => {
      now += ms;
    },
  };
};

t.test('RetryGate closes a key after each failure for longer, and a success opens it', async (t) => {
  const clock = fakeClock();
  const gate = new RetryGate(clock.now, { baseMs: 100, capMs: 1000, random: () => 1 });
  t.ok(gate.open('label'));
  t.strictSame(gate.failed('label'), { waitMs: 100, attempt: 1 });
  t.notOk(gate.open('label'));
  t.ok(gate.open('fence'), 'keys are independent');
  clock.advance(100);
  t.ok(gate.open('label'));
  t.strictSame(gate.failed('label'), { waitMs: 200, attempt: 2 });
  gate.succeeded('label');
  t.ok(gate.open('label'));
  t.strictSame(gate.failed('label'), { waitMs: 100, attempt: 1 }, 'a success resets the backoff');
});

t.test('retryUntil retries what is retryable, rethrows the rest, and stops at the deadline', async (t) => {
  const clock = fakeClock();
  let calls = 0;
  const waits: number[] = [];
  const v = await retryUntil(
    async () => {
      calls++;
      if (calls < 3) throw new Error('busy');
      return 'ok';
    },
    {
      deadline: 10_000,
      retryable: () => true,
      clock,
      backoff: { baseMs: 100, capMs: 1000, random: () => 1 },
      onRetry: (_e, w) => waits.push(w),
    },
  );
  t.equal(v, 'ok');
  t.strictSame(waits, [100, 200]);

  await t.rejects(
    retryUntil(
      async () => {
        throw new Error('forbidden');
      },
      { deadline: 10_000, retryable: () => false, clock },
    ),
    { message: 'forbidden' },
  );
  await t.rejects(
    retryUntil(
      async () => {
        throw new Error('busy');
      },
      {
        deadline: clock.now() + 250,
        retryable: () => true,
        clock,
        what: 'read Lease',
        backoff: { baseMs: 100, capMs: 1000, random: () => 1 },
      },
    ),
    { constructor: DeadlineError, message: 'read Lease: busy' },
  );
});
