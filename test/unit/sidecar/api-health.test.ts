// The sidecar's one owner of "does the API answer": down from the first failure, up at the first
// answer, the last failure's time kept, news of the drain restarting an outage's clock, and the
// listeners told of the changes of downSince only.
import t from 'tap';
import { ManualClock } from '../../../lab/fake/feature-context.ts';
import { ApiHealth, type ApiHealthView } from '../../../sidecar/api-health.ts';

const T0 = 1_700_000_000_000;

function health() {
  const clock = new ManualClock(T0);
  const reopened: string[] = [];
  const api = new ApiHealth({ clock, reopenWatches: (why) => reopened.push(why) });
  const heard: (number | undefined)[] = [];
  api.subscribe((h: ApiHealthView) => heard.push(h.downSince));
  return { clock, api, heard, reopened };
}

t.test('down from the first failure, up at the first answer; failedAt kept after', async (t) => {
  const { clock, api, heard } = health();
  t.ok(api.up);
  t.equal(api.downSince, undefined);
  api.result(true);
  t.strictSame(heard, [], 'an answer while up is no news');
  api.result(false);
  clock.advance(500);
  api.result(false);
  t.equal(api.downSince, T0, 'down since the first failure');
  t.equal(api.failedAt, T0 + 500, 'the last failure');
  t.strictSame(heard, [T0], 'told once: a further failure only moves failedAt');
  clock.advance(500);
  api.result(true);
  t.ok(api.up);
  t.equal(api.failedAt, T0 + 500, 'kept after the API answers');
  t.strictSame(heard, [T0, undefined]);
});

t.test('an outcome seen at a given time: an outage that started before', async (t) => {
  const { api } = health();
  api.result(false, T0 - 60_000);
  t.equal(api.downSince, T0 - 60_000);
  t.equal(api.failedAt, T0 - 60_000);
});

t.test("news of the drain while down restarts the outage's clock; while up it is nothing", async (t) => {
  const { clock, api, heard } = health();
  api.viewNews();
  t.ok(api.up, 'up: nothing');
  t.strictSame(heard, []);
  api.result(false);
  clock.advance(3_000);
  api.viewNews();
  t.equal(api.downSince, T0 + 3_000, 'counts from the news');
  t.strictSame(heard, [T0, T0 + 3_000]);
  api.result(false);
  t.equal(api.downSince, T0 + 3_000, 'a later failure does not move it');
});

t.test('re-opening the watches is the client’s; unsubscribed listeners hear nothing', async (t) => {
  const { api, heard, reopened } = health();
  api.reopenWatches('the own Node listed behind');
  t.strictSame(reopened, ['the own Node listed behind']);
  const more: unknown[] = [];
  const off = api.subscribe((h) => more.push(h.downSince));
  off();
  api.result(false);
  t.strictSame(more, []);
  t.equal(heard.length, 1);
});
