// `kubectl drainguard`: bin/kubectl-drainguard on PATH is found by a real kubectl (1.35, from
// scripts/helm-tools.sh) as its plugin, and the CLI's help then reads as kubectl's does.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import t from 'tap';
import { helpFor, programName } from '../../../cli/program.ts';
import { USAGE as STATUS_USAGE } from '../../../cli/status.ts';
import { tool } from '../helm/render.ts';

const ROOT = join(import.meta.dirname, '..', '..', '..');

t.test('programName: kubectl drainguard when run as the plugin, drainguard otherwise', async (t) => {
  t.equal(programName({}, '/usr/local/bin/drainguard'), 'drainguard');
  t.equal(programName({}, '/home/u/.krew/bin/kubectl-drainguard'), 'kubectl drainguard');
  t.equal(programName({}, '/opt/dg/dist/kubectl-drainguard'), 'kubectl drainguard');
  t.equal(
    programName({ DRAINGUARD_PROGRAM: 'kubectl drainguard' }, '/x/dist/drainguard.mjs'),
    'kubectl drainguard',
  );
});

t.test("helpFor: kubectl's layout, command lines renamed, everything else untouched", async (t) => {
  t.equal(helpFor(STATUS_USAGE, 'drainguard'), STATUS_USAGE, 'unchanged as drainguard');
  const help = helpFor(STATUS_USAGE, 'kubectl drainguard');
  const lines = help.split('\n');
  // Description first, then Usage: with the command on its own indented line, then Options:.
  t.match(lines[0], /^Per node: draining\?/);
  const usage = lines.indexOf('Usage:');
  t.ok(usage > 0, help);
  t.match(lines[usage + 1], /^ {2}kubectl drainguard status \[--kubeconfig PATH\]/);
  const options = lines.indexOf('Options:');
  t.ok(options > usage, 'Options: after Usage:');
  t.match(lines[options + 1], /^ {2}--kubeconfig PATH/);
  // Prose and annotation names keep the product's name.
  t.match(help, 'because drainguard added it');
  t.match(help, 'drainguard.io/l2-handover');
  t.notMatch(help, /kubectl drainguard added|kubectl drainguard\.io/);
  t.equal(help.match(/drainguard status/g)?.length, STATUS_USAGE.match(/drainguard status/g)?.length);
});

/** kubectl with only bin/ (and node's dir) added to PATH: it must find the plugin there. */
function kubectl(args: string[]) {
  const r = spawnSync(tool('kubectl'), args, {
    encoding: 'utf8',
    env: { ...process.env, PATH: `${join(ROOT, 'bin')}:${process.env.PATH}`, KUBECONFIG: '/dev/null' },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

t.test('a real kubectl runs it: plugin list, --help, a command, a mistake', async (t) => {
  const list = kubectl(['plugin', 'list']);
  t.match(list.stdout, /bin\/kubectl-drainguard/, list.stdout + list.stderr);

  const top = kubectl(['drainguard', '--help']);
  t.equal(top.code, 0, top.stderr);
  t.match(top.stdout, /\nUsage:\n {2}kubectl drainguard <command> \[options\]\n/);
  t.match(top.stdout, /"kubectl drainguard <command> --help" for one command/);

  const status = kubectl(['drainguard', 'status', '--help']);
  t.equal(status.code, 0, status.stderr);
  t.match(status.stdout, /\nUsage:\n {2}kubectl drainguard status /);
  t.match(status.stdout, /\nOptions:\n {2}--kubeconfig/);

  const version = kubectl(['drainguard', 'version']);
  t.equal(version.code, 0, version.stderr);
  t.match(version.stdout, /^\d+\.\d+\.\d+/);

  const wrong = kubectl(['drainguard', 'status', '--bogus']);
  t.equal(wrong.code, 2);
  t.match(wrong.stderr, /^kubectl drainguard status: .*bogus/);
  t.match(wrong.stderr, /\nUsage:\n {2}kubectl drainguard status /);

  const unknown = kubectl(['drainguard', 'frobnicate']);
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /^kubectl drainguard: unknown command "frobnicate"/);
});
