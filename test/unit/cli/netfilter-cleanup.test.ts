// `drainguard netfilter-cleanup`'s usage errors: caught before any tool or API is touched.
import t from 'tap';
import { run } from '../../../cli/netfilter-cleanup.ts';

/** Runs the command with stdout and stderr captured. */
async function capture(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const write = { out: process.stdout.write, err: process.stderr.write };
  const into = (to: string[]) =>
    ((s: string) => {
      to.push(s);
      return true;
    }) as typeof process.stdout.write;
  process.stdout.write = into(out);
  process.stderr.write = into(err);
  try {
    const code = await run(argv);
    return { code, out: out.join(''), err: err.join('') };
  } finally {
    process.stdout.write = write.out;
    process.stderr.write = write.err;
  }
}

t.test('--help prints the usage and exits 0', async (t) => {
  const r = await capture(['--help']);
  t.equal(r.code, 0);
  t.match(r.out, /^Usage: drainguard netfilter-cleanup --once/);
});

t.test('bad usage exits 2 with the reason and the usage', async (t) => {
  const missingOnce = await capture([]);
  t.equal(missingOnce.code, 2);
  t.match(missingOnce.err, /--once is required/);
  const unknown = await capture(['--once', '--frobnicate']);
  t.equal(unknown.code, 2);
  t.match(unknown.err, /Usage: drainguard netfilter-cleanup/);
  const confirm = await capture(['--once', '--confirm-seconds', 'soon']);
  t.equal(confirm.code, 2);
  t.match(confirm.err, /--confirm-seconds must be a number from 0 to 3600, got "soon"/);
});
