import t from 'tap';
import { CONTRACT, DEFAULT_DRAIN_TAINTS, specOf } from '../../../shared/contract.ts';
import { ContractError, parseSidecarEnv, renderSidecarEnv } from '../../../shared/contract-env.ts';
import { defaultOf, parseVar } from '../../../shared/contract-values.ts';

const base = {
  DRAINGUARD_PROFILE: 'metallb-speaker',
  DRAINGUARD_FEATURES: 'l2-handover',
  DRAINGUARD_POD_NAME: 'speaker-abc',
  DRAINGUARD_POD_NAMESPACE: 'metallb-system',
  DRAINGUARD_NODE_NAME: 'node-a',
};

t.test('defaults fill every optional variable', async (t) => {
  const c = parseSidecarEnv(base);
  t.equal(c.port, 7480);
  t.equal(c.observeOnly, false);
  t.strictSame(c.drainTaints, DEFAULT_DRAIN_TAINTS);
  t.strictSame(c.memberlistPorts, [7946]);
  t.equal(c.identityScheme, 'pod-name');
  t.strictSame(c.podIPs, []);
});

t.test('every problem is reported at once, naming the variable and what is accepted', async (t) => {
  const err = (() => {
    try {
      parseSidecarEnv({
        ...base,
        DRAINGUARD_PORT: '70000',
        DRAINGUARD_OBSERVE_ONLY: 'yes',
        DRAINGUARD_FEATURES: 'l2-handover,teleport',
        DRAINGUARD_NODE_NAME: '',
      });
    } catch (e) {
      return e;
    }
  })();
  t.ok(err instanceof ContractError);
  if (!(err instanceof ContractError)) return;
  const text = err.problems.join('\n');
  t.match(text, /DRAINGUARD_PORT="70000": accepted is a whole number from 1 to 65535/);
  t.match(text, /DRAINGUARD_OBSERVE_ONLY="yes": accepted values are true, false/);
  t.match(
    text,
    /DRAINGUARD_FEATURES=.*unknown teleport; accepted values are l2-handover, lease-handover, netfilter-cleanup/,
  );
  t.match(text, /DRAINGUARD_NODE_NAME is required/);
  t.equal(err.problems.length, 4);
});

t.test('lease-handover without leases is refused', async (t) => {
  t.throws(
    () => parseSidecarEnv({ ...base, DRAINGUARD_FEATURES: 'lease-handover' }),
    /DRAINGUARD_LEASES is required/,
  );
});

t.test('memberlist ports must be ports', async (t) => {
  t.throws(
    () => parseSidecarEnv({ ...base, DRAINGUARD_MEMBERLIST_PORTS: '7946,abc' }),
    /DRAINGUARD_MEMBERLIST_PORTS/,
  );
  t.strictSame(
    parseSidecarEnv({ ...base, DRAINGUARD_MEMBERLIST_PORTS: '7946, 7947' }).memberlistPorts,
    [7946, 7947],
  );
});

t.test('render → parse round-trips, with downward-API identity and only non-default values', async (t) => {
  const env = renderSidecarEnv({
    profile: 'skupper-router',
    features: ['lease-handover'],
    leases: ['skupper-site-leader'],
    port: 7481,
    observeOnly: false,
    guardedContainer: 'kube-adaptor',
  });
  const names = env.map((e) => e.name);
  t.ok(!names.includes('DRAINGUARD_OBSERVE_ONLY'), 'defaults stay implicit');
  t.strictSame(
    env.filter((e) => e.valueFrom).map((e) => e.valueFrom?.fieldRef.fieldPath),
    ['metadata.name', 'metadata.namespace', 'metadata.uid', 'spec.nodeName', 'status.podIPs'],
  );
  // What the kubelet would resolve:
  const resolved: Record<string, string> = {
    DRAINGUARD_POD_NAME: 'r1',
    DRAINGUARD_POD_NAMESPACE: 'site',
    DRAINGUARD_POD_UID: 'u',
    DRAINGUARD_NODE_NAME: 'n',
    DRAINGUARD_POD_IPS: '10.0.0.1',
  };
  for (const e of env) if (e.value !== undefined) resolved[e.name] = e.value;
  const c = parseSidecarEnv(resolved);
  t.equal(c.profile, 'skupper-router');
  t.strictSame(c.leases, ['skupper-site-leader']);
  t.equal(c.port, 7481);
  t.equal(c.guardedContainer, 'kube-adaptor');
  t.strictSame(c.podIPs, ['10.0.0.1']);
});

t.test('every contract variable is unique and documented', async (t) => {
  const envs = CONTRACT.map((v) => v.env);
  t.equal(new Set(envs).size, envs.length);
  for (const v of CONTRACT) {
    t.match(v.env, /^DRAINGUARD_[A-Z0-9_]+$/);
    t.ok(v.description.length > 10, v.env);
  }
});

t.test('each annotation sets one variable, and is named like it', async (t) => {
  const annotated = CONTRACT.filter((v) => v.annotation !== undefined);
  t.ok(annotated.length > 0);
  const names = annotated.map((v) => v.annotation);
  t.equal(new Set(names).size, names.length);
  for (const v of annotated)
    t.equal(
      v.annotation,
      `drainguard.io/${v.env
        .replace(/^DRAINGUARD_/, '')
        .toLowerCase()
        .replace(/_/g, '-')}`,
      v.env,
    );
  // Identity and what the webhook decides itself are never annotations.
  for (const key of ['profile', 'features', 'podName', 'nodeName', 'port', 'leases'] as const)
    t.equal(specOf(key).annotation, undefined, key);
});

t.test(
  'parseVar: the value, or what is accepted without the variable name; empty is the default',
  async (t) => {
    const budget = specOf('handoverBudgetSeconds');
    t.strictSame(parseVar(budget, '45'), { value: 45 });
    t.strictSame(parseVar(budget, ''), { value: 30 });
    t.strictSame(parseVar(budget, 'abc'), { problem: 'accepted is a whole number from 1 to 600' });
    t.strictSame(parseVar(specOf('drainSignal'), 'x'), {
      problem: 'accepted values are cordon, taint, eviction',
    });
    t.strictSame(parseVar(specOf('memberlistPorts'), '7946, 7947'), { value: [7946, 7947] });
  },
);

t.test('defaultOf: the parsed default, the one copy of it', async (t) => {
  t.equal(defaultOf('handoverBudgetSeconds'), 30);
  t.equal(defaultOf('observeOnly'), false);
  t.strictSame(defaultOf('drainTaints'), DEFAULT_DRAIN_TAINTS);
  t.equal(defaultOf('profile'), undefined, 'a required variable has none');
});

t.test("the /metrics-only listener: its port and the node's IP from the downward API", async (t) => {
  t.equal(parseSidecarEnv(base).metricsPort, 0, 'none unless asked for');
  const c = parseSidecarEnv({
    ...base,
    DRAINGUARD_METRICS_PORT: '7490',
    DRAINGUARD_METRICS_ADDRESS: '192.0.2.10',
  });
  t.equal(c.metricsPort, 7490);
  t.equal(c.metricsAddress, '192.0.2.10');
  t.throws(
    () => parseSidecarEnv({ ...base, DRAINGUARD_METRICS_PORT: '7490' }),
    /DRAINGUARD_METRICS_ADDRESS is required when DRAINGUARD_METRICS_PORT is set/,
  );
  t.throws(
    () =>
      parseSidecarEnv({
        ...base,
        DRAINGUARD_METRICS_PORT: '7480',
        DRAINGUARD_METRICS_ADDRESS: '192.0.2.10',
      }),
    /DRAINGUARD_METRICS_PORT=7480 is DRAINGUARD_PORT's; choose another port/,
  );
  const env = renderSidecarEnv({
    profile: 'netfilter-cleanup',
    features: ['netfilter-cleanup'],
    bindAddress: '127.0.0.1',
    port: 7483,
    metricsPort: 7493,
  });
  t.strictSame(
    env.filter((e) => e.name.startsWith('DRAINGUARD_METRICS_')),
    [
      { name: 'DRAINGUARD_METRICS_PORT', value: '7493' },
      { name: 'DRAINGUARD_METRICS_ADDRESS', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } },
    ],
  );
  t.notOk(
    renderSidecarEnv({ profile: 'lease', features: ['lease-handover'], leases: ['x'] }).some((e) =>
      e.name.startsWith('DRAINGUARD_METRICS_'),
    ),
  );
});
