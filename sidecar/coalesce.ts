// One way to coalesce triggers: watch events, ticks and action results arrive in bursts, but a
// feature must run one pass at a time and never miss a request made while a pass runs.

/**
 * Runs `pass` one at a time. A request while a pass runs queues exactly one more pass (however
 * many requests came), so the last request is always followed by a whole pass.
 */
export class Coalescer {
  private readonly pass: (reason: string) => Promise<void>;
  private readonly stopped: () => boolean;
  private running: Promise<void> | undefined;
  private again = false;

  constructor(pass: (reason: string) => Promise<void>, stopped: () => boolean) {
    this.pass = pass;
    this.stopped = stopped;
  }

  request(reason = 'requested'): void {
    if (this.stopped()) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.loop(reason).finally(() => {
      this.running = undefined;
    });
  }

  /** Resolves when no pass is running (tests and stop()). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private async loop(reason: string): Promise<void> {
    let why = reason;
    do {
      this.again = false;
      await this.pass(why);
      why = 'coalesced trigger';
    } while (this.again && !this.stopped());
  }
}
