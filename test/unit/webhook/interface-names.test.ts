// Issue 22, defect 5: admission and the L2 fence accept the same interface names, so a name the
// fence would refuse during a drain is denied when the pod is created, naming the annotation and
// what is accepted.
import t from 'tap';
import { baseOptions } from '../../../lab/fake/webhook.ts';
import { validateFence } from '../../../sidecar/l2/fence.ts';
import { plan } from '../../../webhook/plan/index.ts';
import { checkInterfaces } from '../../../webhook/plan/validate.ts';
import { speakerPod } from './fixtures.ts';

const NAMES = [
  'eth0',
  'ens5',
  'bond0.100',
  'br-1a2b3c4d5e6f',
  'vlan_7',
  'a'.repeat(15),
  'x"y',
  'a;b',
  'eth0}',
  'eth 0',
  'eth0/1',
  'eth:0',
  '.',
  '..',
  '-eth0',
  '0eth',
  'a'.repeat(16),
  'ëth0',
];

const fenceTakes = (name: string) =>
  validateFence({ vips4: [], vips6: [], interfaces: [name], memberlistPorts: [] }).length === 0;

t.test('a name is admitted exactly when the fence takes it', async (t) => {
  for (const name of NAMES)
    t.equal(checkInterfaces(name) === undefined, fenceTakes(name), JSON.stringify(name));
  t.ok(fenceTakes('bond0.100') && !fenceTakes('x"y'), 'the list holds both kinds');
});

t.test('x"y and a;b are denied at admission, naming the annotation and what is accepted', async (t) => {
  for (const bad of ['x"y', 'a;b', 'eth0,a;b']) {
    const pod = speakerPod() as { metadata: Record<string, unknown> };
    pod.metadata.annotations = { 'drainguard.io/l2-interfaces': bad };
    const p = plan(
      {
        operation: 'CREATE',
        kind: { group: '', version: 'v1', kind: 'Pod' },
        namespace: 'metallb-system',
        object: pod,
      },
      baseOptions(),
    );
    t.equal(p.allowed, false, bad);
    t.match(p.allowed ? '' : p.message, /^drainguard\.io\/l2-interfaces=/, bad);
    t.match(p.allowed ? '' : p.message, /letters, digits, _ \. -/, bad);
  }
});
