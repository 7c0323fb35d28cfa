// issue 42, item 6: a promise rejection nobody handles ends a Node process by default; the
// sidecar's process logs and counts it instead and runs on. Checked in a process of its own (tap
// fails a test on an unhandled rejection in its own process).
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import t from 'tap';

const ROOT = new URL('../../../', import.meta.url).pathname;

/** A process that installs the handler (or not), rejects a promise nobody handles, then says it lives. */
async function rejectOnce(guarded: boolean): Promise<{ code: number; stdout: string; stderr: string }> {
  const script = `
    import { createLogger } from '${ROOT}shared/log.ts';
    import { Registry } from '${ROOT}shared/metrics.ts';
    import { logUnhandledRejections } from '${ROOT}sidecar/unhandled.ts';
    const metrics = new Registry();
    const counter = metrics.counter('drainguard_unhandled_rejections_total', 'test');
    if (${guarded}) logUnhandledRejections(createLogger('test'), counter);
    void Promise.reject(new Error('a background write threw'));
    setTimeout(() => { process.stdout.write('alive ' + counter.get() + '\\n'); }, 50);
  `;
  try {
    const r = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);
    return { code: 0, ...r };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, stdout: x.stdout, stderr: x.stderr };
  }
}

t.test('without the handler the process dies of an unhandled rejection (what the sidecar did)', async (t) => {
  const r = await rejectOnce(false);
  t.not(r.code, 0);
  t.notMatch(r.stdout, /alive/);
  t.match(r.stderr, /a background write threw/);
});

t.test('with it the rejection is logged as an error, counted, and the process runs on', async (t) => {
  const r = await rejectOnce(true);
  t.equal(r.code, 0);
  t.match(r.stdout, /"level":"error".*"err":"a background write threw".*unhandled promise rejection/);
  t.match(r.stdout, /alive 1/);
});
