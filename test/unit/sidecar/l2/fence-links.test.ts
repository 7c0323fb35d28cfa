// Which links the fence goes on (fence-links.ts), from plain data: interface names restrict the
// fence only where every VIP handed over is restricted, by what the ServiceL2Status objects say
// now; the fail-safe's pools and default route, and the installed fence's links, are fenced
// whatever is named (issue 42, item 2).
import t from 'tap';
import { fenceLinkPlan, type LinkPlanInput } from '../../../../sidecar/l2/fence-links.ts';

const www = { service: 'web/www', ips: ['192.0.2.10'] };
const api = { service: 'web/api', ips: ['192.0.2.11', '2001:db8::11'] };
const base: LinkPlanInput = {
  configured: [],
  statusInterfaces: {},
  services: [www, api],
  failsafeTargets: [],
  installed: [],
};
const FAILSAFE = ['192.0.2.100', 'default'];

t.test('every VIP restricted (its L2Advertisements list interfaces): the named links', async (t) => {
  const plan = fenceLinkPlan({
    ...base,
    statusInterfaces: { 'web/www': ['eth1'], 'web/api': ['eth1', 'eth2'] },
  });
  t.strictSame(plan, {
    named: ['eth1', 'eth2'],
    targets: ['192.0.2.10', '192.0.2.11', '2001:db8::11'],
    always: [],
    kept: [],
  });
});

t.test(
  'one VIP announced on every interface (a status naming none): its routes are fenced beside the named links',
  async (t) => {
    // Before: eth1 alone was fenced, and web/api's VIPs answered on eth0 beside their new owner.
    const plan = fenceLinkPlan({ ...base, statusInterfaces: { 'web/www': ['eth1'], 'web/api': [] } });
    t.strictSame(plan.named, ['eth1']);
    t.strictSame(plan.always, ['192.0.2.10', '192.0.2.11', '2001:db8::11']);
  },
);

t.test(
  'a service handed over without an own status now (deleted mid-handover, or never written) counts as every interface',
  async (t) => {
    const plan = fenceLinkPlan({ ...base, statusInterfaces: { 'web/www': ['eth1'] } });
    t.strictSame(plan.named, ['eth1']);
    t.strictSame(plan.always, ['192.0.2.10', '192.0.2.11', '2001:db8::11']);
    // MetalLB < 0.14.4, or nothing usable written: no names at all, the VIPs' routes.
    t.strictSame(fenceLinkPlan(base).named, []);
    t.strictSame(fenceLinkPlan(base).always, ['192.0.2.10', '192.0.2.11', '2001:db8::11']);
  },
);

t.test(
  "the fail-safe: MetalLB's pools' and the default route's links are fenced whatever is named",
  async (t) => {
    // Before: with a link named, only it was fenced; a speaker cut off from memberlist announces
    // every pool VIP on every interface its advertisements allow.
    const restricted = fenceLinkPlan({
      ...base,
      statusInterfaces: { 'web/www': ['eth1'], 'web/api': ['eth1'] },
      failsafeTargets: FAILSAFE,
    });
    t.strictSame(restricted.named, ['eth1']);
    t.strictSame(restricted.always, FAILSAFE);
    const configured = fenceLinkPlan({ ...base, configured: ['bond0'], failsafeTargets: FAILSAFE });
    t.strictSame(configured.named, ['bond0']);
    t.strictSame(configured.always, FAILSAFE);
  },
);

t.test('DRAINGUARD_L2_INTERFACES restricts every VIP, whatever the statuses say', async (t) => {
  const plan = fenceLinkPlan({ ...base, configured: ['bond0'], statusInterfaces: { 'web/www': [] } });
  t.strictSame(plan, {
    named: ['bond0'],
    targets: ['192.0.2.10', '192.0.2.11', '2001:db8::11'],
    always: [],
    kept: [],
  });
});

t.test(
  "the installed fence's links stay while it is on: a status deleted mid-handover takes no link away",
  async (t) => {
    const plan = fenceLinkPlan({ ...base, statusInterfaces: {}, installed: ['eth1', 'eth0'] });
    t.strictSame(plan.kept, ['eth1', 'eth0']);
    t.strictSame(plan.named, [], 'kept, not named: a link gone since is reported by the read-back');
  },
);
