import t from 'tap';
import { createLogger } from '../../../shared/log.ts';
import { ToolError, ToolRunner } from '../../../sidecar/runner.ts';

const log = createLogger('test', 'silent');

t.test('runs allowed tools, records them, and turns failures into ToolError with stderr', async (t) => {
  const r = new ToolRunner({ log });
  const out = await r.run('ip', ['-j', 'link', 'show', 'lo']);
  t.match(out.stdout, /"ifname":"lo"/);
  await t.rejects(r.run('ip', ['link', 'show', 'no-such-dev0']), {
    constructor: ToolError,
    message: /no-such-dev0|not exist/i,
  });
  t.equal(r.history.length, 2);
  t.equal(r.history[1]?.exitCode !== 0, true);
});

t.test('refuses tools outside the allow-list', async (t) => {
  await t.rejects(new ToolRunner({ log }).run('rm', ['-rf', '/']), /not an allowed tool/);
});

t.test('observe-only skips mutating calls but still runs reads', async (t) => {
  const r = new ToolRunner({ log, observeOnly: true });
  const res = await r.run('nft', ['add', 'table', 'inet', 'never'], { mutates: true });
  t.equal(res.skipped, true);
  t.equal(r.history[0]?.skipped, true);
  const read = await r.run('ip', ['-j', 'link', 'show', 'lo']);
  t.equal(read.skipped, false);
});

t.test('a missing binary is reported as such', async (t) => {
  const r = new ToolRunner({ log, prefix: ['/nonexistent/wrapper'] });
  await t.rejects(r.run('ip', ['link']), /not found on PATH/);
});
