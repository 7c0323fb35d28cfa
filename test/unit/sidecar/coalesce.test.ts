import t from 'tap';
import { Coalescer } from '../../../sidecar/coalesce.ts';

t.test('Coalescer', async (t) => {
  t.test('a burst while a pass runs queues exactly one more pass, with the coalesced reason', async (t) => {
    const reasons: string[] = [];
    let release: () => void = () => {};
    let gate = new Promise<void>((r) => {
      release = r;
    });
    const c = new Coalescer(
      async (why) => {
        reasons.push(why);
        await gate;
      },
      () => false,
    );
    c.request('first');
    c.request('a');
    c.request('b');
    c.request('c');
    const first = gate;
    gate = Promise.resolve();
    release();
    await first;
    await c.idle();
    t.strictSame(reasons, ['first', 'coalesced trigger']);
  });

  t.test('no pass starts once stopped, and a queued one is dropped', async (t) => {
    let stopped = false;
    let passes = 0;
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const c = new Coalescer(
      async () => {
        passes++;
        await gate;
      },
      () => stopped,
    );
    c.request();
    c.request();
    stopped = true;
    release();
    await c.idle();
    c.request();
    await c.idle();
    t.equal(passes, 1);
  });

  t.test('a request after a pass finished starts a new one', async (t) => {
    let passes = 0;
    const c = new Coalescer(
      async () => {
        passes++;
      },
      () => false,
    );
    c.request();
    await c.idle();
    c.request();
    await c.idle();
    t.equal(passes, 2);
  });
});
