import t from 'tap';
import { ManualClock } from '../../../lab/fake/feature-context.ts';
import { type PeriodicTask, PeriodicTasks } from '../../../sidecar/periodic.ts';

const every = (ms: number) => (now: number, last: number) => now - last >= ms;

t.test('a task runs when due, and is due again from its last run', async (t) => {
  const clock = new ManualClock(10_000);
  const ran: string[] = [];
  const task = (name: string, ms: number): PeriodicTask => ({
    name,
    mode: 'await',
    due: every(ms),
    run: async () => {
      ran.push(`${name}@${clock.now()}`);
    },
  });
  const tasks = new PeriodicTasks(clock, [task('a', 1_000), task('b', 3_000)], () => {});
  tasks.ranNow('b');
  await tasks.runDue();
  t.strictSame(ran, ['a@10000'], 'b counted as run at the start');
  clock.advance(999);
  await tasks.runDue();
  t.strictSame(ran, ['a@10000']);
  clock.advance(2_001);
  await tasks.runDue();
  t.strictSame(ran, ['a@10000', 'a@13000', 'b@13000'], 'in the table’s order');
  t.equal(tasks.lastRun('b'), 13_000);
  t.equal(new PeriodicTasks(clock, [], () => {}).lastRun('never'), 0);
});

t.test('background: never two at once; fire: one per due time; failures reported, not thrown', async (t) => {
  const clock = new ManualClock(0);
  let release = () => {};
  const hanging = new Promise<void>((r) => {
    release = r;
  });
  const started = { background: 0, fire: 0 };
  const failed: string[] = [];
  const tasks = new PeriodicTasks(
    clock,
    [
      {
        name: 'probe',
        mode: 'background',
        due: every(1_000),
        run: async () => {
          started.background++;
          await hanging;
          throw new Error('unreachable');
        },
      },
      {
        name: 'read',
        mode: 'fire',
        due: every(1_000),
        run: async () => {
          started.fire++;
          await hanging;
        },
      },
    ],
    (task, e) => failed.push(`${task}: ${(e as Error).message}`),
  );
  for (let i = 0; i < 3; i++) {
    clock.advance(1_000);
    await tasks.runDue();
  }
  t.strictSame(started, { background: 1, fire: 3 }, 'the hanging probe is not started again');
  release();
  await hanging;
  await new Promise(setImmediate);
  t.strictSame(failed, ['probe: unreachable']);
  clock.advance(1_000);
  await tasks.runDue();
  t.equal(started.background, 2, 'once it ended, due again');
});

t.test('a name used twice is refused', async (t) => {
  const task: PeriodicTask = { name: 'x', mode: 'await', due: () => true, run: async () => {} };
  t.throws(
    () => new PeriodicTasks(new ManualClock(0), [task, task], () => {}),
    /periodic task x named twice/,
  );
});
