// The planner's steps one by one, on plain data: each step's result, and every denial or skip it
// can produce. plan() as a whole is covered by the golden, hardening and fuzz tests.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EnvVar, Feature } from '../../../shared/contract.ts';
import { buildEnv, type EnvInputs } from '../../../webhook/plan/env.ts';
import {
  checkMemberlistAnnotation,
  findGuardedContainer,
  requireLeases,
  resolveLeases,
} from '../../../webhook/plan/guard.ts';
import { chooseMode, targetNode } from '../../../webhook/plan/mode.ts';
import {
  annotationOps,
  buildPatch,
  graceOps,
  preStopOps,
  processNamespaceOps,
  sidecarOps,
} from '../../../webhook/plan/patch.ts';
import {
  chooseProfile,
  findExclusion,
  type PodView,
  readPod,
  requireServiceAccountToken,
} from '../../../webhook/plan/pod.ts';
import { choosePort, declaredPorts } from '../../../webhook/plan/port.ts';
import { readSettings, resolveFeatures } from '../../../webhook/plan/settings.ts';
import { buildSidecar, type SidecarInputs } from '../../../webhook/plan/sidecar.ts';
import { isStop } from '../../../webhook/plan/step.ts';
import type { AdmissionRequestLike } from '../../../webhook/planner.ts';
import { skupperPod, speakerPod } from './fixtures.ts';
import { baseOptions } from './helpers.ts';

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary pod JSON
type Obj = Record<string, any>;

const create = (object: unknown, more: Partial<AdmissionRequestLike> = {}): AdmissionRequestLike => ({
  operation: 'CREATE',
  kind: { group: '', version: 'v1', kind: 'Pod' },
  namespace: 'metallb-system',
  object,
  ...more,
});
/** The view of a fixture pod, as readPod gives it. */
const viewOf = (pod: Obj, namespace = 'metallb-system'): PodView => {
  const v = readPod(create(pod, { namespace }));
  assert.ok(!isStop(v), 'expected a pod view');
  return v;
};
const denied = (r: unknown): string => {
  assert.ok(isStop(r) && 'denied' in r, `expected a denial, got ${JSON.stringify(r)}`);
  return r.denied;
};
const l2 = new Set<Feature>(['l2-handover']);
const lease = new Set<Feature>(['lease-handover']);
const c = (name: string, more: Obj = {}) => ({ name, ...more });

// --- readPod

test('readPod: a Pod CREATE gives the view the later steps read', () => {
  const v = viewOf(speakerPod());
  assert.equal(v.namespace, 'metallb-system');
  assert.equal(v.labels['app.kubernetes.io/component'], 'speaker');
  assert.deepEqual(v.annotations, {});
  assert.deepEqual(
    v.containers.map((x) => x.name),
    ['speaker'],
  );
  assert.deepEqual(v.inits, []);
  assert.equal(v.hostNetwork, true);
  assert.equal(v.hasMetadata, true);
  assert.equal(v.hasAnnotations, false);
  // The request's namespace counts; the object's only when the request has none.
  assert.equal(
    viewOf({ metadata: { namespace: 'obj' }, spec: { containers: [{}] } }, 'req').namespace,
    'req',
  );
  assert.equal(viewOf({ metadata: { namespace: 'obj' }, spec: { containers: [{}] } }, '').namespace, 'obj');
  const bare = viewOf({ spec: { containers: [{}], initContainers: [{ name: 'i' }] } });
  assert.equal(bare.hasMetadata, false);
  assert.equal(bare.hostNetwork, false);
  assert.equal(bare.inits.length, 1);
});

test('readPod: requests other than a Pod CREATE are skipped', () => {
  const pod = speakerPod();
  assert.deepEqual(readPod(create(pod, { kind: { group: 'apps', kind: 'Pod' } })), { skip: 'not-a-pod' });
  assert.deepEqual(readPod(create(pod, { kind: { group: '', kind: 'Deployment' } })), { skip: 'not-a-pod' });
  assert.deepEqual(readPod(create(pod, { subResource: 'status' })), { skip: 'not-a-pod' });
  assert.deepEqual(readPod(create(pod, { operation: 'UPDATE' })), { skip: 'update' });
  assert.deepEqual(readPod(create(pod, { operation: 'DELETE' })), { skip: 'other-operation' });
});

test('readPod: a malformed pod is denied, naming the field', () => {
  for (const object of [null, 'pod', [speakerPod()]])
    assert.equal(denied(readPod(create(object))), 'request.object must be a Pod object');
  assert.equal(
    denied(readPod(create({ metadata: {} }))),
    'request.object.spec must be an object (the pod spec)',
  );
  for (const containers of [undefined, [], {}, [1], [{}, null]])
    assert.equal(
      denied(readPod(create({ spec: { containers } }))),
      'request.object.spec.containers must be a non-empty list of containers',
    );
  assert.equal(
    denied(readPod(create({ spec: { containers: [{}], initContainers: [{}, 'x'] } }))),
    'request.object.spec.initContainers must be a list of containers',
  );
});

// --- findExclusion

test('findExclusion: an ordinary pod is not excluded', () => {
  assert.equal(findExclusion(viewOf(speakerPod()), baseOptions()), undefined);
});

test('findExclusion: excluded and own namespaces, opted-out, own pods and injected pods are skipped', () => {
  const pod = (more: Partial<PodView> = {}) => ({ ...viewOf(speakerPod()), ...more });
  assert.deepEqual(findExclusion(pod({ namespace: 'kube-system' }), {}), { skip: 'excluded-namespace' });
  assert.equal(findExclusion(pod({ namespace: 'kube-system' }), { excludedNamespaces: [] }), undefined);
  assert.deepEqual(findExclusion(pod({ namespace: 'lb' }), { excludedNamespaces: ['lb'] }), {
    skip: 'excluded-namespace',
  });
  assert.deepEqual(findExclusion(pod({ namespace: 'dg' }), { excludedNamespaces: [], ownNamespace: 'dg' }), {
    skip: 'excluded-namespace',
  });
  assert.deepEqual(findExclusion(pod({ labels: { 'drainguard.io/inject': 'disabled' } }), {}), {
    skip: 'opted-out',
  });
  const selfLabels = { app: 'dg', component: 'webhook' };
  assert.deepEqual(findExclusion(pod({ labels: { ...selfLabels, x: 'y' } }), { selfLabels }), {
    skip: 'self',
  });
  assert.equal(findExclusion(pod({ labels: { app: 'dg' } }), { selfLabels }), undefined);
  assert.equal(findExclusion(pod({ labels: {} }), { selfLabels: {} }), undefined);
  assert.deepEqual(findExclusion(pod({ annotations: { 'drainguard.io/status': '{}' } }), {}), {
    skip: 'already-injected',
  });
  assert.deepEqual(findExclusion(pod({ inits: [c('drainguard')] }), {}), { skip: 'already-injected' });
});

// --- chooseProfile

test('chooseProfile: the annotated profile, else the one the labels imply', () => {
  const speaker = viewOf(speakerPod());
  assert.equal(chooseProfile(speaker.labels, {}), 'metallb-speaker');
  assert.equal(chooseProfile(speaker.labels, { 'drainguard.io/profile': 'lease' }), 'lease');
  assert.equal(chooseProfile({}, { 'drainguard.io/leases': 'l' }), 'lease');
});

test('chooseProfile: an unknown profile is denied; a pod without one is skipped with a warning', () => {
  assert.equal(
    denied(chooseProfile({}, { 'drainguard.io/profile': 'speaker' })),
    'drainguard.io/profile="speaker": accepted values are metallb-speaker, skupper-router, lease, netfilter-cleanup',
  );
  const r = chooseProfile({ app: 'nginx' }, {});
  assert.ok(isStop(r) && 'skip' in r);
  assert.equal(r.skip, 'no-profile');
  assert.match(r.warnings?.[0] ?? '', /^drainguard: not injected: no drainguard profile/);
});

// --- requireServiceAccountToken

test('requireServiceAccountToken: only automountServiceAccountToken: false is denied', () => {
  assert.equal(requireServiceAccountToken({}), undefined);
  assert.equal(requireServiceAccountToken({ automountServiceAccountToken: true }), undefined);
  const msg = denied(requireServiceAccountToken({ automountServiceAccountToken: false }));
  assert.match(msg, /^spec\.automountServiceAccountToken: false: /);
  assert.match(msg, /drainguard\.io\/inject=disabled/);
});

// --- readSettings

test('readSettings: each annotation gives its typed contract value', () => {
  assert.deepEqual(readSettings({}), {});
  assert.deepEqual(
    readSettings({
      'drainguard.io/handover-budget-seconds': '60',
      'drainguard.io/observe-only': 'true',
      'drainguard.io/l2-interfaces': 'eth0,eth1',
      'drainguard.io/memberlist-ports': '7946',
      'drainguard.io/drain-signal': 'taint',
      'unrelated.io/x': 'y',
    }),
    {
      handoverBudgetSeconds: 60,
      observeOnly: true,
      drainSignal: 'taint',
      l2Interfaces: ['eth0', 'eth1'],
      memberlistPorts: [7946],
    },
  );
});

test('readSettings: a bad value is denied by the stricter check or by the contract, named by its annotation', () => {
  assert.match(
    denied(readSettings({ 'drainguard.io/l2-interfaces': 'eth0/1' })),
    /^drainguard\.io\/l2-interfaces="eth0\/1": accepted is a comma-separated list of interface names/,
  );
  assert.match(
    denied(readSettings({ 'drainguard.io/metallb-namespace': 'Bad_NS' })),
    /^drainguard\.io\/metallb-namespace="Bad_NS": accepted is a namespace name/,
  );
  // The contract's complaint without its DRAINGUARD_ variable name.
  assert.equal(
    denied(readSettings({ 'drainguard.io/handover-budget-seconds': 'abc' })),
    'drainguard.io/handover-budget-seconds="abc": accepted is a whole number from 1 to 600',
  );
  assert.equal(
    denied(readSettings({ 'drainguard.io/log-level': 'loud', 'drainguard.io/observe-only': 'maybe' })),
    denied(readSettings({ 'drainguard.io/observe-only': 'maybe' })),
    'the first bad annotation in contract order is the one named',
  );
});

// --- resolveFeatures

test("resolveFeatures: the profile's features, plus netfilter cleanup when annotated", () => {
  assert.deepEqual(resolveFeatures('metallb-speaker', {}, true), l2);
  assert.deepEqual(resolveFeatures('lease', { 'drainguard.io/netfilter-cleanup': 'false' }, false), lease);
  assert.deepEqual(
    [...(resolveFeatures('lease', { 'drainguard.io/netfilter-cleanup': 'true' }, true) as Set<Feature>)],
    ['lease-handover', 'netfilter-cleanup'],
  );
});

test('resolveFeatures: a bad annotation, and node-level features off the host network, are denied', () => {
  assert.equal(
    denied(resolveFeatures('lease', { 'drainguard.io/netfilter-cleanup': 'yes' }, true)),
    'drainguard.io/netfilter-cleanup="yes": accepted values are true, false',
  );
  assert.equal(
    denied(resolveFeatures('metallb-speaker', {}, false)),
    'profile metallb-speaker (L2 handover) works in the node network namespace only: the pod needs spec.hostNetwork: true',
  );
  assert.equal(
    denied(resolveFeatures('netfilter-cleanup', {}, false)),
    'netfilter cleanup (profile netfilter-cleanup) works in the node network namespace only: the pod needs spec.hostNetwork: true',
  );
  assert.match(
    denied(resolveFeatures('lease', { 'drainguard.io/netfilter-cleanup': 'true' }, false)),
    /^netfilter cleanup \(drainguard\.io\/netfilter-cleanup=true\) works/,
  );
});

// --- chooseMode

test('chooseMode: the annotation overrides the webhook; auto follows the target kubelet and API server', () => {
  const spec = viewOf(speakerPod()).spec; // pinned to node-a
  const opts = baseOptions();
  assert.equal((chooseMode({}, spec, opts) as { native: boolean }).native, true);
  assert.deepEqual(chooseMode({ 'drainguard.io/sidecar-mode': 'classic' }, spec, opts), {
    native: false,
    why: 'classic sidecar requested',
  });
  assert.deepEqual(chooseMode({}, spec, baseOptions({ mode: 'native', kubeletVersions: undefined })), {
    native: true,
    why: 'native sidecar requested',
  });
  assert.deepEqual(chooseMode({}, spec, baseOptions({ apiServerVersion: 'v1.28.9' })), {
    native: false,
    why: 'API server v1.28.9 is older than 1.29: classic sidecar',
  });
  assert.deepEqual(chooseMode({}, spec, baseOptions({ kubeletVersions: new Map([['node-a', 'v1.28.2']]) })), {
    native: false,
    why: 'node node-a kubelet v1.28.2 is older than 1.29: classic sidecar',
  });
  // Not pinned: every known kubelet must do.
  const old = new Map([
    ['a', 'v1.30.0'],
    ['b', 'v1.27.0'],
  ]);
  assert.equal(
    (chooseMode({}, {}, baseOptions({ kubeletVersions: old })) as { why: string }).why,
    'kubelets older than 1.29 on b: classic sidecar',
  );
});

test('chooseMode: auto without node versions warns; a bad annotation is denied', () => {
  const unknown = baseOptions({ kubeletVersions: undefined });
  assert.deepEqual(chooseMode({}, {}, unknown), {
    native: false,
    why: 'node versions unknown (no cluster access): classic sidecar',
    warning: 'drainguard: node versions unknown (no cluster access): classic sidecar',
  });
  assert.equal((chooseMode({ 'drainguard.io/sidecar-mode': 'auto' }, {}, unknown) as Obj).warning, undefined);
  assert.equal(
    denied(chooseMode({ 'drainguard.io/sidecar-mode': 'sidecar' }, {}, unknown)),
    'drainguard.io/sidecar-mode="sidecar": accepted values are auto, native, classic',
  );
});

test("targetNode: spec.nodeName, or a DaemonSet's single matchFields pin", () => {
  assert.equal(targetNode({ nodeName: 'n1' }), 'n1');
  assert.equal(targetNode(viewOf(speakerPod()).spec), 'node-a');
  const pin = (values: string[]) => ({
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values }] }],
        },
      },
    },
  });
  assert.equal(targetNode(pin(['a', 'b'])), undefined);
  assert.equal(targetNode({}), undefined);
});

// --- findGuardedContainer

test("findGuardedContainer: the annotated container, else the profile's, else the only one", () => {
  const speaker = [c('speaker'), c('frr')];
  assert.deepEqual(findGuardedContainer('metallb-speaker', l2, {}, speaker), {
    guarded: 'speaker',
    warnings: [],
  });
  assert.deepEqual(
    findGuardedContainer('metallb-speaker', l2, { 'drainguard.io/guarded-container': 'frr' }, speaker),
    { guarded: 'frr', warnings: [] },
  );
  // Either key is honoured.
  assert.deepEqual(
    findGuardedContainer('lease', lease, { 'drainguard.io/guarded-container': 'b' }, [c('a'), c('b')]),
    { guarded: 'b', warnings: [] },
  );
  assert.deepEqual(findGuardedContainer('metallb-speaker', l2, {}, [c('main')]), {
    guarded: 'main',
    warnings: ['drainguard: no container named speaker; guarding main'],
  });
  assert.deepEqual(findGuardedContainer('lease', lease, {}, [c('app')]), { guarded: 'app', warnings: [] });
  assert.deepEqual(
    findGuardedContainer('netfilter-cleanup', new Set(['netfilter-cleanup']), {}, [c('a'), c('b')]),
    {
      guarded: undefined,
      warnings: [],
    },
  );
});

test('findGuardedContainer: an unknown or missing choice is denied; skupper without its container is skipped', () => {
  assert.equal(
    denied(
      findGuardedContainer('metallb-speaker', l2, { 'drainguard.io/guarded-container': 'x' }, [c('speaker')]),
    ),
    'drainguard.io/guarded-container="x": no such container; containers are speaker',
  );
  assert.equal(
    denied(findGuardedContainer('lease', lease, {}, [c('a'), c('b')])),
    'drainguard.io/leader-container is required: the pod has several containers (a, b)',
  );
  assert.deepEqual(findGuardedContainer('skupper-router', lease, {}, [c('router')]), {
    skip: 'no-profile',
    warnings: [
      'drainguard: not injected: skupper router pod has no container kube-adaptor; set drainguard.io/leader-container',
    ],
  });
});

// --- resolveLeases, checkMemberlistAnnotation, requireLeases

test("resolveLeases: the annotated Leases, else the profile's; a bad list is denied", () => {
  assert.deepEqual(resolveLeases('skupper-router', {}), ['skupper-site-leader']);
  assert.equal(resolveLeases('lease', {}), undefined);
  assert.deepEqual(resolveLeases('skupper-router', { 'drainguard.io/leases': ' a, ns/b ,' }), ['a', 'ns/b']);
  assert.match(
    denied(resolveLeases('lease', { 'drainguard.io/leases': 'Bad_Name' })),
    /^drainguard\.io\/leases="Bad_Name": accepted is a comma-separated list of Lease names/,
  );
});

test('checkMemberlistAnnotation: only ports the guarded container declares', () => {
  const containers = [
    c('speaker', { ports: [{ containerPort: 7946 }, { containerPort: 7472, hostPort: 7473 }] }),
  ];
  assert.equal(checkMemberlistAnnotation({}, 'speaker', containers), undefined);
  assert.equal(
    checkMemberlistAnnotation({ 'drainguard.io/memberlist-ports': '7946,7473' }, 'speaker', containers),
    undefined,
  );
  assert.equal(
    denied(checkMemberlistAnnotation({ 'drainguard.io/memberlist-ports': '10250' }, 'speaker', containers)),
    'drainguard.io/memberlist-ports="10250": accepted are ports declared by container speaker: 7946, 7472, 7473',
  );
  assert.equal(
    denied(checkMemberlistAnnotation({ 'drainguard.io/memberlist-ports': '7946' }, undefined, containers)),
    'drainguard.io/memberlist-ports="7946": accepted are ports declared by container (none): (none declared)',
  );
});

test('requireLeases: lease handover needs a Lease', () => {
  assert.equal(requireLeases('lease', lease, ['l']), undefined);
  assert.equal(requireLeases('metallb-speaker', l2, undefined), undefined);
  for (const leases of [undefined, []])
    assert.equal(
      denied(requireLeases('lease', lease, leases)),
      'drainguard.io/leases is required for profile lease: name the Lease(s) to hand over',
    );
});

// --- choosePort

test("choosePort: the profile's default, else the next port nobody uses, bound to loopback on the host network", () => {
  assert.deepEqual(choosePort('metallb-speaker', {}, viewOf(speakerPod()).containers, true), {
    port: 7480,
    host: '127.0.0.1',
  });
  // 7482 is taken and 7483 is another profile's default.
  assert.deepEqual(choosePort('lease', {}, [c('a', { ports: [{ hostPort: 7482 }] })], false), { port: 7484 });
  assert.deepEqual(choosePort('lease', { 'drainguard.io/port': '9000' }, [], false), { port: 9000 });
  assert.deepEqual(
    [
      ...declaredPorts([
        c('a', { ports: [{ containerPort: 80, hostPort: 8080 }, 'junk'] }),
        c('b', { ports: [{ containerPort: 80 }] }),
      ]),
    ],
    [
      [80, 'a'],
      [8080, 'a'],
    ],
  );
});

test('choosePort: a bad or used annotated port is denied, and so is a pod with no port left', () => {
  for (const bad of ['80', 'abc', '70000', '9000.5', ''])
    assert.equal(
      denied(choosePort('lease', { 'drainguard.io/port': bad }, [], false)),
      `drainguard.io/port=${JSON.stringify(bad)}: accepted is a whole number from 1024 to 65535`,
    );
  assert.equal(
    denied(
      choosePort('metallb-speaker', { 'drainguard.io/port': '7946' }, viewOf(speakerPod()).containers, true),
    ),
    'drainguard.io/port=7946: port 7946 is already used by container speaker; choose another port',
  );
  const every = Array.from({ length: 65536 - 7480 }, (_, i) => ({ containerPort: 7480 + i }));
  assert.equal(
    denied(choosePort('metallb-speaker', {}, [c('greedy', { ports: every })], true)),
    'no free port for the sidecar',
  );
});

// --- buildEnv

const envInputs = (more: Partial<EnvInputs> = {}): EnvInputs => ({
  profile: 'metallb-speaker',
  features: l2,
  settings: {},
  endpoint: { port: 7490, host: '127.0.0.1' },
  guarded: 'speaker',
  leases: undefined,
  namespace: 'lb',
  containers: [
    c('speaker', {
      ports: [
        { name: 'memberlist-udp', containerPort: 7947 },
        { name: 'monitoring', containerPort: 7472 },
      ],
    }),
  ],
  ...more,
});
const envValues = (env: unknown): Record<string, string | undefined> => {
  assert.ok(!isStop(env), `expected an env, got ${JSON.stringify(env)}`);
  return Object.fromEntries((env as EnvVar[]).map((e) => [e.name, e.value]));
};

test('buildEnv: what the webhook decided, with the memberlist ports and namespace taken from the pod', () => {
  const settings = { handoverBudgetSeconds: 45 };
  const env = envValues(buildEnv(envInputs({ settings })));
  assert.equal(env.DRAINGUARD_PROFILE, 'metallb-speaker');
  assert.equal(env.DRAINGUARD_FEATURES, 'l2-handover');
  assert.equal(env.DRAINGUARD_PORT, '7490');
  assert.equal(env.DRAINGUARD_BIND_ADDRESS, '127.0.0.1');
  assert.equal(env.DRAINGUARD_GUARDED_CONTAINER, 'speaker');
  assert.equal(env.DRAINGUARD_MEMBERLIST_PORTS, '7947');
  assert.equal(env.DRAINGUARD_METALLB_NAMESPACE, 'lb');
  assert.equal(env.DRAINGUARD_HANDOVER_BUDGET_SECONDS, '45');
  assert.deepEqual(settings, { handoverBudgetSeconds: 45 }, 'the input settings are not changed');
  // Annotated settings win over what the pod implies.
  const annotated = envValues(
    buildEnv(envInputs({ settings: { memberlistPorts: [7472], metallbNamespace: 'other' } })),
  );
  assert.equal(annotated.DRAINGUARD_MEMBERLIST_PORTS, '7472');
  assert.equal(annotated.DRAINGUARD_METALLB_NAMESPACE, 'other');
  const skupper = envValues(
    buildEnv(
      envInputs({
        profile: 'skupper-router',
        features: lease,
        endpoint: { port: 7481 },
        guarded: 'kube-adaptor',
        leases: ['skupper-site-leader'],
      }),
    ),
  );
  assert.equal(skupper.DRAINGUARD_LEASES, 'skupper-site-leader');
  assert.equal(skupper.DRAINGUARD_SUCCESSOR_SELECTOR, 'skupper.io/component=router');
  assert.equal(skupper.DRAINGUARD_BIND_ADDRESS, undefined);
  assert.equal(skupper.DRAINGUARD_MEMBERLIST_PORTS, undefined);
});

test('buildEnv: settings the sidecar would reject are denied', () => {
  assert.equal(
    denied(buildEnv(envInputs({ profile: 'lease', features: lease, leases: undefined }))),
    'the sidecar would reject its settings: DRAINGUARD_LEASES is required when DRAINGUARD_FEATURES includes lease-handover',
  );
});

// --- buildSidecar

const sidecarInputs = (more: Partial<SidecarInputs> = {}): SidecarInputs => ({
  image: 'img:1',
  env: [{ name: 'DRAINGUARD_PROFILE', value: 'lease' }],
  endpoint: { port: 7482 },
  hostNetwork: false,
  native: false,
  features: lease,
  volumes: undefined,
  ...more,
});

test('buildSidecar: classic off the host network: a declared port, non-root, no capabilities', () => {
  const { container: s, volume } = buildSidecar(sidecarInputs()) as { container: Obj; volume: Obj };
  assert.equal(s.name, 'drainguard');
  assert.equal(s.image, 'img:1');
  assert.deepEqual(s.env, [{ name: 'DRAINGUARD_PROFILE', value: 'lease' }]);
  assert.deepEqual(s.ports, [{ name: 'drainguard', containerPort: 7482, protocol: 'TCP' }]);
  assert.deepEqual(s.readinessProbe.httpGet, { path: '/readyz', port: 7482, scheme: 'HTTP' });
  assert.equal(s.livenessProbe.httpGet.path, '/healthz');
  assert.equal(s.restartPolicy, undefined);
  assert.equal(s.securityContext.runAsNonRoot, true);
  assert.deepEqual(s.securityContext.capabilities, { drop: ['ALL'] });
  assert.deepEqual(volume, { name: 'drainguard-tmp', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } });
  assert.deepEqual(s.volumeMounts, [{ name: 'drainguard-tmp', mountPath: '/tmp' }]);
});

test('buildSidecar: native on the host network: no port, probes on loopback, NET_ADMIN for netfilter', () => {
  const { container: s, volume } = buildSidecar(
    sidecarInputs({
      endpoint: { port: 7480, host: '127.0.0.1' },
      hostNetwork: true,
      native: true,
      features: l2,
      volumes: [{ name: 'drainguard-tmp' }, { name: 'drainguard-tmp-1' }],
    }),
  ) as { container: Obj; volume: Obj };
  assert.equal('ports' in s, false);
  assert.equal(s.restartPolicy, 'Always');
  assert.deepEqual(s.readinessProbe.httpGet, {
    path: '/readyz',
    port: 7480,
    host: '127.0.0.1',
    scheme: 'HTTP',
  });
  assert.equal(s.securityContext.runAsUser, 0);
  assert.deepEqual(s.securityContext.capabilities, { drop: ['ALL'], add: ['NET_ADMIN'] });
  assert.equal(volume.name, 'drainguard-tmp-2');
  assert.equal(s.volumeMounts[0].name, 'drainguard-tmp-2');
});

// --- buildPatch and its builders

const sidecar = { container: { name: 'drainguard' }, volume: { name: 'drainguard-tmp' } };

test('sidecarOps: native goes first among the init containers, classic last among the containers', () => {
  assert.deepEqual(sidecarOps({ initContainers: [], volumes: [] }, sidecar, true), [
    { op: 'add', path: '/spec/initContainers/0', value: sidecar.container },
    { op: 'add', path: '/spec/volumes/-', value: sidecar.volume },
  ]);
  assert.deepEqual(sidecarOps({}, sidecar, true), [
    { op: 'add', path: '/spec/initContainers', value: [sidecar.container] },
    { op: 'add', path: '/spec/volumes', value: [sidecar.volume] },
  ]);
  assert.deepEqual(sidecarOps({ initContainers: [] }, sidecar, false)[0], {
    op: 'add',
    path: '/spec/containers/-',
    value: sidecar.container,
  });
});

test('preStopOps: a preStop on the guarded container, an existing one kept with a warning', () => {
  const endpoint = { port: 7480, host: '127.0.0.1' };
  const preStop = { httpGet: { path: '/prestop', port: 7480, host: '127.0.0.1', scheme: 'HTTP' } };
  assert.deepEqual(preStopOps('metallb-speaker', [c('x'), c('speaker')], 'speaker', endpoint), {
    ops: [{ op: 'add', path: '/spec/containers/1/lifecycle', value: { preStop } }],
    warnings: [],
  });
  assert.deepEqual(
    preStopOps('metallb-speaker', [c('speaker', { lifecycle: { postStart: {} } })], 'speaker', endpoint),
    {
      ops: [{ op: 'add', path: '/spec/containers/0/lifecycle/preStop', value: preStop }],
      warnings: [],
    },
  );
  assert.deepEqual(
    preStopOps('metallb-speaker', [c('speaker', { lifecycle: { preStop: {} } })], 'speaker', endpoint),
    {
      ops: [],
      warnings: [
        'drainguard: container speaker already has a preStop hook; kept it, handover is not awaited',
      ],
    },
  );
  assert.deepEqual(preStopOps('skupper-router', [c('kube-adaptor')], 'kube-adaptor', endpoint), {
    ops: [],
    warnings: [],
  });
  assert.deepEqual(preStopOps('metallb-speaker', [c('speaker')], undefined, endpoint), {
    ops: [],
    warnings: [],
  });
});

test('processNamespaceOps: lease handover shares the PID namespace; an explicit false is kept with a warning', () => {
  assert.deepEqual(processNamespaceOps({}, lease), {
    ops: [{ op: 'add', path: '/spec/shareProcessNamespace', value: true }],
    warnings: [],
  });
  assert.deepEqual(processNamespaceOps({ shareProcessNamespace: true }, lease), { ops: [], warnings: [] });
  const kept = processNamespaceOps({ shareProcessNamespace: false }, lease);
  assert.deepEqual(kept.ops, []);
  assert.match(kept.warnings[0] ?? '', /^drainguard: shareProcessNamespace is false: /);
  assert.deepEqual(processNamespaceOps({}, l2), { ops: [], warnings: [] });
});

test('graceOps: the grace period raised to budget + 5 s, the old value kept in an annotation', () => {
  assert.deepEqual(graceOps('metallb-speaker', { terminationGracePeriodSeconds: 0 }, 30), {
    ops: [{ op: 'add', path: '/spec/terminationGracePeriodSeconds', value: 35 }],
    warnings: [
      'drainguard: terminationGracePeriodSeconds raised from 0 to 35 to cover the 30 s handover budget',
    ],
    annotations: { 'drainguard.io/original-termination-grace-period-seconds': '0' },
  });
  const unset = graceOps('lease', {}, 60);
  assert.equal(
    unset.warnings[0],
    'drainguard: terminationGracePeriodSeconds raised from default 30 to 65 to cover the 60 s handover budget',
  );
  assert.deepEqual(unset.annotations, { 'drainguard.io/original-termination-grace-period-seconds': 'unset' });
  const none = { ops: [], warnings: [], annotations: {} };
  assert.deepEqual(graceOps('lease', { terminationGracePeriodSeconds: 35 }, 30), none);
  assert.deepEqual(graceOps('netfilter-cleanup', { terminationGracePeriodSeconds: 0 }, 30), none);
});

test('annotationOps: into the existing map (keys escaped), as a new map, or in new metadata', () => {
  const added = { 'a~b/c': '1', 'drainguard.io/status': '{}' };
  assert.deepEqual(annotationOps({ hasMetadata: true, hasAnnotations: true }, added), [
    { op: 'add', path: '/metadata/annotations/a~0b~1c', value: '1' },
    { op: 'add', path: '/metadata/annotations/drainguard.io~1status', value: '{}' },
  ]);
  assert.deepEqual(annotationOps({ hasMetadata: true, hasAnnotations: false }, added), [
    { op: 'add', path: '/metadata/annotations', value: added },
  ]);
  assert.deepEqual(annotationOps({ hasMetadata: false, hasAnnotations: false }, added), [
    { op: 'add', path: '/metadata', value: { annotations: added } },
  ]);
});

test('buildPatch: the builders in order, the status annotation last, new metadata first', () => {
  const pod = viewOf(skupperPod(), 'site');
  const endpoint = { port: 7481 };
  const inputs = {
    pod,
    profile: 'skupper-router' as const,
    features: lease,
    native: true,
    sidecar,
    guarded: 'kube-adaptor',
    endpoint,
    budgetSeconds: 30,
    version: '9.9.9',
  };
  const p = buildPatch(inputs);
  assert.deepEqual(
    p.patch.map((o) => o.path),
    [
      '/spec/initContainers',
      '/spec/volumes',
      '/spec/shareProcessNamespace',
      '/spec/terminationGracePeriodSeconds',
      '/metadata/annotations/drainguard.io~1original-termination-grace-period-seconds',
      '/metadata/annotations/drainguard.io~1status',
    ],
  );
  assert.deepEqual(Object.keys(p.annotations), [
    'drainguard.io/original-termination-grace-period-seconds',
    'drainguard.io/status',
  ]);
  assert.deepEqual(JSON.parse(p.annotations['drainguard.io/status'] ?? ''), {
    version: '9.9.9',
    profile: 'skupper-router',
    features: ['lease-handover'],
    mode: 'native',
    port: 7481,
    container: 'drainguard',
  });
  assert.deepEqual(p.warnings, [
    'drainguard: terminationGracePeriodSeconds raised from default 30 to 35 to cover the 30 s handover budget',
  ]);
  const bare = buildPatch({ ...inputs, pod: { ...pod, hasMetadata: false, hasAnnotations: false } });
  assert.equal(bare.patch[0]?.path, '/metadata');
  assert.equal(bare.patch.length, 5);
});
