import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLogger } from '../../../shared/log.ts';
import { ToolError, ToolRunner } from '../../../sidecar/runner.ts';

const log = createLogger('test', 'silent');

test('runs allowed tools, records them, and turns failures into ToolError with stderr', async () => {
  const r = new ToolRunner({ log });
  const out = await r.run('ip', ['-j', 'link', 'show', 'lo']);
  assert.match(out.stdout, /"ifname":"lo"/);
  await assert.rejects(
    r.run('ip', ['link', 'show', 'no-such-dev0']),
    (e) => e instanceof ToolError && /no-such-dev0|not exist/i.test(e.message),
  );
  assert.equal(r.history.length, 2);
  assert.equal(r.history[1]?.exitCode !== 0, true);
});

test('refuses tools outside the allow-list', async () => {
  await assert.rejects(new ToolRunner({ log }).run('rm', ['-rf', '/']), /not an allowed tool/);
});

test('observe-only skips mutating calls but still runs reads', async () => {
  const r = new ToolRunner({ log, observeOnly: true });
  const res = await r.run('nft', ['add', 'table', 'inet', 'never'], { mutates: true });
  assert.equal(res.skipped, true);
  assert.equal(r.history[0]?.skipped, true);
  const read = await r.run('ip', ['-j', 'link', 'show', 'lo']);
  assert.equal(read.skipped, false);
});

test('a missing binary is reported as such', async () => {
  const r = new ToolRunner({ log, prefix: ['/nonexistent/wrapper'] });
  await assert.rejects(r.run('ip', ['link']), /not found on PATH/);
});
