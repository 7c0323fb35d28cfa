// MetalLB's --ignore-exclude-lb read from the speaker container's command line as Go's flag
// package reads it, and what the planner does with it.
import t from 'tap';
import { baseOptions } from '../../../lab/fake/webhook.ts';
import { plan } from '../../../webhook/plan/index.ts';
import { ignoresExcludeLb, readSpeakerArgs } from '../../../webhook/plan/speaker-args.ts';
import { speakerPod } from './fixtures.ts';

t.test('ignoresExcludeLb: -flag, --flag, =value (strconv.ParseBool), the last one counting', async (t) => {
  const c = (args?: string[], command?: string[]) => ({ name: 'speaker', args, command });
  t.equal(ignoresExcludeLb(c(['--port=7472'])), false);
  t.equal(ignoresExcludeLb(c(['--ignore-exclude-lb'])), true);
  t.equal(ignoresExcludeLb(c(['-ignore-exclude-lb'])), true);
  t.equal(ignoresExcludeLb(c(['--ignore-exclude-lb=true'])), true);
  t.equal(ignoresExcludeLb(c(['--ignore-exclude-lb=1'])), true);
  t.equal(ignoresExcludeLb(c(['--ignore-exclude-lb=false'])), false);
  t.equal(ignoresExcludeLb(c(['--ignore-exclude-lb=0'])), false);
  t.equal(ignoresExcludeLb(c(['--ignore-exclude-lb', '--ignore-exclude-lb=False'])), false, 'last wins');
  t.equal(ignoresExcludeLb(c(undefined, ['/speaker', '--ignore-exclude-lb'])), true, 'in command');
  t.equal(ignoresExcludeLb(c(undefined, ['sh', '-c', '/speaker --ignore-exclude-lb --port=7472'])), true);
  t.equal(ignoresExcludeLb(c(['--ignore-exclude-lbx', '--no-ignore-exclude-lb'])), false, 'other flags');
  t.equal(ignoresExcludeLb(undefined), false);
});

t.test('readSpeakerArgs: only the guarded container, only with the L2 handover', async (t) => {
  const containers = [
    { name: 'speaker', args: ['--ignore-exclude-lb'] },
    { name: 'frr', args: [] },
  ];
  const l2 = new Set(['l2-handover'] as const);
  t.strictSame(readSpeakerArgs(l2, 'speaker', containers).settings, { speakerIgnoresExcludeLb: true });
  t.strictSame(readSpeakerArgs(l2, 'frr', containers).settings, {});
  t.strictSame(readSpeakerArgs(new Set(['netfilter-cleanup'] as const), 'speaker', containers), {
    settings: {},
    warnings: [],
  });
});

t.test('plan: the speaker with the flag is admitted, warned, and its sidecar told', async (t) => {
  const pod = speakerPod() as { spec: { containers: { args: string[] }[] } };
  pod.spec.containers[0]?.args.push('--ignore-exclude-lb');
  const p = plan(
    { operation: 'CREATE', kind: { kind: 'Pod' }, namespace: 'metallb-system', object: pod },
    baseOptions({}),
  );
  t.equal(p.allowed, true);
  if (!p.allowed) return;
  t.match(
    p.warnings.join('\n'),
    /container speaker runs with --ignore-exclude-lb: .* the L2 handover is off/,
  );
  t.match(JSON.stringify(p.patch), /"name":"DRAINGUARD_SPEAKER_IGNORES_EXCLUDE_LB","value":"true"/);
  // Without the flag: neither.
  const plain = plan(
    { operation: 'CREATE', kind: { kind: 'Pod' }, namespace: 'metallb-system', object: speakerPod() },
    baseOptions({}),
  );
  t.equal(plain.allowed, true);
  if (!plain.allowed) return;
  t.notMatch(plain.warnings.join('\n'), /ignore-exclude-lb/);
  t.notMatch(JSON.stringify(plain.patch), /IGNORES_EXCLUDE_LB/);
});
