import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  CONTRACT,
  ContractError,
  DEFAULT_DRAIN_TAINTS,
  parseSidecarEnv,
  renderSidecarEnv,
} from '../../../shared/contract.ts';

const base = {
  DRAINGUARD_PROFILE: 'metallb-speaker',
  DRAINGUARD_FEATURES: 'l2-handover',
  DRAINGUARD_POD_NAME: 'speaker-abc',
  DRAINGUARD_POD_NAMESPACE: 'metallb-system',
  DRAINGUARD_NODE_NAME: 'node-a',
};

test('defaults fill every optional variable', () => {
  const c = parseSidecarEnv(base);
  assert.equal(c.port, 7480);
  assert.equal(c.observeOnly, false);
  assert.deepEqual(c.drainTaints, DEFAULT_DRAIN_TAINTS);
  assert.deepEqual(c.memberlistPorts, [7946]);
  assert.equal(c.identityScheme, 'pod-name');
  assert.deepEqual(c.podIPs, []);
});

test('every problem is reported at once, naming the variable and what is accepted', () => {
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
  assert.ok(err instanceof ContractError);
  const text = err.problems.join('\n');
  assert.match(text, /DRAINGUARD_PORT="70000": accepted is a whole number from 1 to 65535/);
  assert.match(text, /DRAINGUARD_OBSERVE_ONLY="yes": accepted values are true, false/);
  assert.match(
    text,
    /DRAINGUARD_FEATURES=.*unknown teleport; accepted values are l2-handover, lease-handover, netfilter-cleanup/,
  );
  assert.match(text, /DRAINGUARD_NODE_NAME is required/);
  assert.equal(err.problems.length, 4);
});

test('lease-handover without leases is refused', () => {
  assert.throws(
    () => parseSidecarEnv({ ...base, DRAINGUARD_FEATURES: 'lease-handover' }),
    /DRAINGUARD_LEASES is required/,
  );
});

test('memberlist ports must be ports', () => {
  assert.throws(
    () => parseSidecarEnv({ ...base, DRAINGUARD_MEMBERLIST_PORTS: '7946,abc' }),
    /DRAINGUARD_MEMBERLIST_PORTS/,
  );
  assert.deepEqual(
    parseSidecarEnv({ ...base, DRAINGUARD_MEMBERLIST_PORTS: '7946, 7947' }).memberlistPorts,
    [7946, 7947],
  );
});

test('render → parse round-trips, with downward-API identity and only non-default values', () => {
  const env = renderSidecarEnv({
    profile: 'skupper-router',
    features: ['lease-handover'],
    leases: ['skupper-site-leader'],
    port: 7481,
    observeOnly: false,
    guardedContainer: 'kube-adaptor',
  });
  const names = env.map((e) => e.name);
  assert.ok(!names.includes('DRAINGUARD_OBSERVE_ONLY'), 'defaults stay implicit');
  assert.deepEqual(
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
  assert.equal(c.profile, 'skupper-router');
  assert.deepEqual(c.leases, ['skupper-site-leader']);
  assert.equal(c.port, 7481);
  assert.equal(c.guardedContainer, 'kube-adaptor');
  assert.deepEqual(c.podIPs, ['10.0.0.1']);
});

test('every contract variable is unique and documented', () => {
  const envs = CONTRACT.map((v) => v.env);
  assert.equal(new Set(envs).size, envs.length);
  for (const v of CONTRACT) {
    assert.match(v.env, /^DRAINGUARD_[A-Z0-9_]+$/);
    assert.ok(v.description.length > 10, v.env);
  }
});
