// Named tasks a feature's tick loop runs when they are due, each remembering when it last ran:
// what a feature did with a pair of hand-kept fields per task (`lastProbe`, `probeRunning`, …),
// one table it can be read from and tested by.
import type { Clock } from '../shared/clock.ts';

/**
 * How a due task runs: awaited by the tick; in the background (not awaited, never two at once:
 * one hanging on a dropped path must not hold up the ticks or pile up); or fired (not awaited,
 * one per due time whatever the last one does).
 */
export type TaskMode = 'await' | 'background' | 'fire';

export interface PeriodicTask {
  /** Says what it is for (logs, tests). */
  name: string;
  mode: TaskMode;
  /** Whether it is due now, given when it last ran (0: never). */
  due(now: number, last: number): boolean;
  run(): Promise<unknown>;
}

export class PeriodicTasks {
  private readonly clock: Clock;
  private readonly tasks: readonly PeriodicTask[];
  private readonly last = new Map<string, number>();
  private readonly running = new Set<string>();
  private readonly failed: (task: string, e: unknown) => void;

  /** `failed`: a task that was not awaited threw (an awaited one throws to the tick loop). */
  constructor(clock: Clock, tasks: readonly PeriodicTask[], failed: (task: string, e: unknown) => void) {
    const names = tasks.map((t) => t.name);
    const twice = names.find((n, i) => names.indexOf(n) !== i);
    if (twice) throw new Error(`periodic task ${twice} named twice`);
    this.clock = clock;
    this.tasks = tasks;
    this.failed = failed;
  }

  /** Counts `name` as run now (done outside the loop, e.g. at start). */
  ranNow(name: string): void {
    this.last.set(name, this.clock.now());
  }

  /** When `name` last ran (0: never). */
  lastRun(name: string): number {
    return this.last.get(name) ?? 0;
  }

  /** Runs every task that is due, in the table's order. */
  async runDue(): Promise<void> {
    for (const task of this.tasks) {
      const now = this.clock.now();
      if (this.running.has(task.name) || !task.due(now, this.lastRun(task.name))) continue;
      this.last.set(task.name, now);
      if (task.mode === 'await') {
        await task.run();
        continue;
      }
      if (task.mode === 'background') this.running.add(task.name);
      void task
        .run()
        .catch((e: unknown) => this.failed(task.name, e))
        .finally(() => this.running.delete(task.name));
    }
  }
}
