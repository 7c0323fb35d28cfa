// issue 42, item 6: the L2 status annotation is read back whole or not at all; a malformed one is
// named by the first field that is wrong (the sidecar's Warning Event quotes it).
import t from 'tap';
import { parseL2State, readL2State } from '../../../shared/l2-state.ts';
import { fencedL2Status } from '../cli/l2-state-fixture.ts';

const good = fencedL2Status({}, { pools: ['198.51.100.100-198.51.100.120'], held: ['2001:db8::1'] });
const withField = (over: Record<string, unknown>) => JSON.stringify({ ...good, ...over });

t.test('a status as the sidecar writes it is read back as is', async (t) => {
  t.strictSame(readL2State(JSON.stringify(good)), { state: good });
  t.strictSame(readL2State(undefined), {}, 'absent: no state, no problem');
  t.strictSame(readL2State(''), {});
});

t.test('a malformed one: no state, and the first field that is wrong', async (t) => {
  const cases: [string, string][] = [
    ['not json', 'not JSON'],
    ['[]', 'the annotation: not an object'],
    [withField({ phase: 'bogus' }), 'phase: not one of'],
    [withField({ since: undefined }), 'since: missing'],
    [withField({ services: 'web/www' }), 'services: not an array'],
    [withField({ services: [{ service: 'web/www' }] }), 'services[0].ips: missing'],
    [
      withField({ services: [{ service: 'web/www', ips: ['192.0.2.1', 'x'] }] }),
      'services[0].ips[1]: not an IP',
    ],
    [withField({ vips: [1] }), 'vips[0]: not an IP address'],
    [withField({ handedTo: { 'web/www': 2 } }), 'handedTo.web/www: not a string'],
    [withField({ handedTo: [] }), 'handedTo: not an object'],
    [withField({ fenced: 'yes' }), 'fenced: not true or false'],
    [withField({ interfaces: 'eth0' }), 'interfaces: not an array'],
    [withField({ pools: ['192.0.2.1-2001:db8::1'] }), 'pools[0]: not an address range'],
    [withField({ held: ['eth0'] }), 'held[0]: not an IP address'],
    [withField({ failsafeDrop: 'all' }), 'failsafeDrop: not one of pools, foreign'],
  ];
  for (const [text, problem] of cases) {
    const r = readL2State(text);
    t.equal(r.state, undefined, text);
    t.ok(r.problem?.startsWith(problem), `${text}: ${r.problem}`);
    t.equal(parseL2State(text), undefined);
  }
});
