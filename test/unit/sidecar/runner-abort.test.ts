// The sidecar's lifetime ends the tools it runs: a tool that hangs (a host tool stuck on a lock)
// must not keep the process past its grace period.
import t from 'tap';
import { createLogger } from '../../../shared/log.ts';
import { ToolError, ToolRunner } from '../../../sidecar/runner.ts';

t.test('aborting the lifetime kills a running tool and starts no other', async (t) => {
  const lifetime = new AbortController();
  // `ip` resolved to a shell loop through the prefix: the allow-list still applies to the tool.
  const runner = new ToolRunner({
    log: createLogger('test', 'silent'),
    prefix: ['sh', '-c', 'sleep 30', '--'],
    signal: lifetime.signal,
  });
  const started = Date.now();
  const running = runner.run('ip', ['link'], { timeoutMs: 60_000 });
  setTimeout(() => lifetime.abort('grace period spent'), 100);
  await t.rejects(running, ToolError);
  t.ok(Date.now() - started < 5_000, `ended ${Date.now() - started} ms after it began`);
  await t.rejects(runner.run('ip', ['link']), { message: /not run: the sidecar is stopping/ });
});
