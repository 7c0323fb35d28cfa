// The planner's steps one by one, on plain data: each step's result, and every denial or skip it
// can produce. plan() as a whole is covered by the golden, hardening and fuzz tests.
import t, { type Test } from 'tap';
import { baseOptions } from '../../../lab/fake/webhook.ts';
import type { FeatureName } from '../../../shared/contract.ts';
import type { EnvVar } from '../../../shared/contract-env.ts';
import { buildEnv, type EnvInputs } from '../../../webhook/plan/env.ts';
import {
  checkMemberlistAnnotation,
  findGuardedContainer,
  requireLeases,
  resolveLeases,
} from '../../../webhook/plan/guard.ts';
import {
  annotationOps,
  buildPatch,
  graceOps,
  preStopOps,
  processNamespaceOps,
  sidecarOps,
} from '../../../webhook/plan/injection-patch.ts';
import { chooseMode, targetNode } from '../../../webhook/plan/mode.ts';
import {
  chooseProfile,
  findExclusion,
  type PodView,
  readPod,
  requireServiceAccountToken,
} from '../../../webhook/plan/pod.ts';
import { choosePort, declaredPorts, metricsPortWarnings } from '../../../webhook/plan/port.ts';
import { readSettings, resolveFeatures } from '../../../webhook/plan/settings.ts';
import { buildSidecar, SIDECAR_PORT_NAME, type SidecarInputs } from '../../../webhook/plan/sidecar.ts';
import { type AdmissionRequestLike, isStop } from '../../../webhook/plan/step.ts';
import { skupperPod, speakerPod } from './fixtures.ts';

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
const viewOf = (t: Test, pod: Obj, namespace = 'metallb-system'): PodView => {
  const v = readPod(create(pod, { namespace }));
  t.ok(!isStop(v), 'expected a pod view');
  if (isStop(v)) throw new Error('expected a pod view');
  return v;
};
const denied = (t: Test, r: unknown): string => {
  t.ok(isStop(r) && 'denied' in r, `expected a denial, got ${JSON.stringify(r)}`);
  if (!(isStop(r) && 'denied' in r)) throw new Error(`expected a denial, got ${JSON.stringify(r)}`);
  return r.denied;
};
const l2 = new Set<FeatureName>(['l2-handover']);
const lease = new Set<FeatureName>(['lease-handover']);
const c = (name: string, more: Obj = {}) => ({ name, ...more });

// --- readPod

t.test('readPod: a Pod CREATE gives the view the later steps read', async (t) => {
  const v = viewOf(t, speakerPod());
  t.equal(v.namespace, 'metallb-system');
  t.equal(v.labels['app.kubernetes.io/component'], 'speaker');
  t.strictSame(v.annotations, {});
  t.strictSame(
    v.containers.map((x) => x.name),
    ['speaker'],
  );
  t.strictSame(v.inits, []);
  t.equal(v.hostNetwork, true);
  t.equal(v.hasMetadata, true);
  t.equal(v.hasAnnotations, false);
  // The request's namespace counts; the object's only when the request has none.
  t.equal(viewOf(t, { metadata: { namespace: 'obj' }, spec: { containers: [{}] } }, 'req').namespace, 'req');
  t.equal(viewOf(t, { metadata: { namespace: 'obj' }, spec: { containers: [{}] } }, '').namespace, 'obj');
  const bare = viewOf(t, { spec: { containers: [{}], initContainers: [{ name: 'i' }] } });
  t.equal(bare.hasMetadata, false);
  t.equal(bare.hostNetwork, false);
  t.equal(bare.inits.length, 1);
});

t.test('readPod: requests other than a Pod CREATE are skipped', async (t) => {
  const pod = speakerPod();
  t.strictSame(readPod(create(pod, { kind: { group: 'apps', kind: 'Pod' } })), { skip: 'not-a-pod' });
  t.strictSame(readPod(create(pod, { kind: { group: '', kind: 'Deployment' } })), { skip: 'not-a-pod' });
  t.strictSame(readPod(create(pod, { subResource: 'status' })), { skip: 'not-a-pod' });
  t.strictSame(readPod(create(pod, { operation: 'UPDATE' })), { skip: 'update' });
  t.strictSame(readPod(create(pod, { operation: 'DELETE' })), { skip: 'other-operation' });
});

t.test('readPod: a malformed pod is denied, naming the field', async (t) => {
  for (const object of [null, 'pod', [speakerPod()]])
    t.equal(denied(t, readPod(create(object))), 'request.object must be a Pod object');
  t.equal(
    denied(t, readPod(create({ metadata: {} }))),
    'request.object.spec must be an object (the pod spec)',
  );
  for (const containers of [undefined, [], {}, [1], [{}, null]])
    t.equal(
      denied(t, readPod(create({ spec: { containers } }))),
      'request.object.spec.containers must be a non-empty list of containers',
    );
  t.equal(
    denied(t, readPod(create({ spec: { containers: [{}], initContainers: [{}, 'x'] } }))),
    'request.object.spec.initContainers must be a list of containers',
  );
});

// --- findExclusion

t.test('findExclusion: an ordinary pod is not excluded', async (t) => {
  t.equal(findExclusion(viewOf(t, speakerPod()), baseOptions()), undefined);
});

t.test(
  'findExclusion: excluded and own namespaces, opted-out, own pods and injected pods are skipped',
  async (t) => {
    const pod = (more: Partial<PodView> = {}) => ({ ...viewOf(t, speakerPod()), ...more });
    t.strictSame(findExclusion(pod({ namespace: 'kube-system' }), {}), { skip: 'excluded-namespace' });
    t.equal(findExclusion(pod({ namespace: 'kube-system' }), { excludedNamespaces: [] }), undefined);
    t.strictSame(findExclusion(pod({ namespace: 'lb' }), { excludedNamespaces: ['lb'] }), {
      skip: 'excluded-namespace',
    });
    t.strictSame(findExclusion(pod({ namespace: 'dg' }), { excludedNamespaces: [], ownNamespace: 'dg' }), {
      skip: 'excluded-namespace',
    });
    t.strictSame(findExclusion(pod({ labels: { 'drainguard.io/inject': 'disabled' } }), {}), {
      skip: 'opted-out',
    });
    const selfLabels = { app: 'dg', component: 'webhook' };
    t.strictSame(findExclusion(pod({ labels: { ...selfLabels, x: 'y' } }), { selfLabels }), {
      skip: 'self',
    });
    t.equal(findExclusion(pod({ labels: { app: 'dg' } }), { selfLabels }), undefined);
    t.equal(findExclusion(pod({ labels: {} }), { selfLabels: {} }), undefined);
    t.strictSame(findExclusion(pod({ annotations: { 'drainguard.io/status': '{}' } }), {}), {
      skip: 'already-injected',
    });
    t.strictSame(findExclusion(pod({ inits: [c('drainguard')] }), {}), { skip: 'already-injected' });
  },
);

// --- chooseProfile

t.test('chooseProfile: the annotated profile, else the one the labels imply', async (t) => {
  const speaker = viewOf(t, speakerPod());
  t.equal(chooseProfile(speaker.labels, {}), 'metallb-speaker');
  t.equal(chooseProfile(speaker.labels, { 'drainguard.io/profile': 'lease' }), 'lease');
  t.equal(chooseProfile({}, { 'drainguard.io/leases': 'l' }), 'lease');
});

t.test(
  'chooseProfile: an unknown profile is denied; a pod without one is skipped with a warning',
  async (t) => {
    t.equal(
      denied(t, chooseProfile({}, { 'drainguard.io/profile': 'speaker' })),
      'drainguard.io/profile="speaker": accepted values are metallb-speaker, skupper-router, lease, netfilter-cleanup',
    );
    const r = chooseProfile({ app: 'nginx' }, {});
    t.ok(isStop(r) && 'skip' in r);
    if (!(isStop(r) && 'skip' in r)) return;
    t.equal(r.skip, 'no-profile');
    t.match(r.warnings?.[0] ?? '', /^drainguard: not injected: no drainguard profile/);
  },
);

// --- requireServiceAccountToken

t.test('requireServiceAccountToken: only automountServiceAccountToken: false is denied', async (t) => {
  t.equal(requireServiceAccountToken({}), undefined);
  t.equal(requireServiceAccountToken({ automountServiceAccountToken: true }), undefined);
  const msg = denied(t, requireServiceAccountToken({ automountServiceAccountToken: false }));
  t.match(msg, /^spec\.automountServiceAccountToken: false: /);
  t.match(msg, /drainguard\.io\/inject=disabled/);
});

// --- readSettings

t.test('readSettings: each annotation gives its typed contract value', async (t) => {
  t.strictSame(readSettings({}), {});
  t.strictSame(
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

t.test(
  'readSettings: a bad value is denied by the stricter check or by the contract, named by its annotation',
  async (t) => {
    t.match(
      denied(t, readSettings({ 'drainguard.io/l2-interfaces': 'eth0/1' })),
      /^drainguard\.io\/l2-interfaces="eth0\/1": accepted is a comma-separated list of interface names/,
    );
    t.match(
      denied(t, readSettings({ 'drainguard.io/metallb-namespace': 'Bad_NS' })),
      /^drainguard\.io\/metallb-namespace="Bad_NS": accepted is a namespace name/,
    );
    // The contract's complaint without its DRAINGUARD_ variable name.
    t.equal(
      denied(t, readSettings({ 'drainguard.io/handover-budget-seconds': 'abc' })),
      'drainguard.io/handover-budget-seconds="abc": accepted is a whole number from 1 to 600',
    );
    t.equal(
      denied(t, readSettings({ 'drainguard.io/log-level': 'loud', 'drainguard.io/observe-only': 'maybe' })),
      denied(t, readSettings({ 'drainguard.io/observe-only': 'maybe' })),
      'the first bad annotation in contract order is the one named',
    );
  },
);

// --- resolveFeatures

t.test("resolveFeatures: the profile's features, plus netfilter cleanup when annotated", async (t) => {
  t.strictSame(resolveFeatures('metallb-speaker', {}, true), l2);
  t.strictSame(resolveFeatures('lease', { 'drainguard.io/netfilter-cleanup': 'false' }, false), lease);
  t.strictSame(
    [...(resolveFeatures('lease', { 'drainguard.io/netfilter-cleanup': 'true' }, true) as Set<FeatureName>)],
    ['lease-handover', 'netfilter-cleanup'],
  );
});

t.test(
  'resolveFeatures: a bad annotation, and node-level features off the host network, are denied',
  async (t) => {
    t.equal(
      denied(t, resolveFeatures('lease', { 'drainguard.io/netfilter-cleanup': 'yes' }, true)),
      'drainguard.io/netfilter-cleanup="yes": accepted values are true, false',
    );
    t.equal(
      denied(t, resolveFeatures('metallb-speaker', {}, false)),
      'profile metallb-speaker (L2 handover) works in the node network namespace only: the pod needs spec.hostNetwork: true',
    );
    t.equal(
      denied(t, resolveFeatures('netfilter-cleanup', {}, false)),
      'netfilter cleanup (profile netfilter-cleanup) works in the node network namespace only: the pod needs spec.hostNetwork: true',
    );
    t.match(
      denied(t, resolveFeatures('lease', { 'drainguard.io/netfilter-cleanup': 'true' }, false)),
      /^netfilter cleanup \(drainguard\.io\/netfilter-cleanup=true\) works/,
    );
  },
);

// --- chooseMode

t.test(
  'chooseMode: the annotation overrides the webhook; auto follows the target kubelet and API server',
  async (t) => {
    const spec = viewOf(t, speakerPod()).spec; // pinned to node-a
    const opts = baseOptions();
    t.equal((chooseMode({}, spec, opts) as { native: boolean }).native, true);
    t.strictSame(chooseMode({ 'drainguard.io/sidecar-mode': 'classic' }, spec, opts), {
      native: false,
      why: 'classic sidecar requested',
    });
    t.strictSame(chooseMode({}, spec, baseOptions({ mode: 'native', kubeletVersions: undefined })), {
      native: true,
      why: 'native sidecar requested',
    });
    t.strictSame(chooseMode({}, spec, baseOptions({ apiServerVersion: 'v1.28.9' })), {
      native: false,
      why: 'API server v1.28.9 is older than 1.29: classic sidecar',
    });
    t.strictSame(chooseMode({}, spec, baseOptions({ kubeletVersions: new Map([['node-a', 'v1.28.2']]) })), {
      native: false,
      why: 'node node-a kubelet v1.28.2 is older than 1.29: classic sidecar',
    });
    // Not pinned: every known kubelet must do.
    const old = new Map([
      ['a', 'v1.30.0'],
      ['b', 'v1.27.0'],
    ]);
    t.equal(
      (chooseMode({}, {}, baseOptions({ kubeletVersions: old })) as { why: string }).why,
      'kubelets older than 1.29 on b: classic sidecar',
    );
  },
);

t.test('chooseMode: auto without node versions warns; a bad annotation is denied', async (t) => {
  const unknown = baseOptions({ kubeletVersions: undefined });
  t.strictSame(chooseMode({}, {}, unknown), {
    native: false,
    why: 'node versions unknown (no cluster access): classic sidecar',
    warning: 'drainguard: node versions unknown (no cluster access): classic sidecar',
  });
  t.equal((chooseMode({ 'drainguard.io/sidecar-mode': 'auto' }, {}, unknown) as Obj).warning, undefined);
  t.equal(
    denied(t, chooseMode({ 'drainguard.io/sidecar-mode': 'sidecar' }, {}, unknown)),
    'drainguard.io/sidecar-mode="sidecar": accepted values are auto, native, classic',
  );
});

t.test("targetNode: spec.nodeName, or a DaemonSet's single matchFields pin", async (t) => {
  t.equal(targetNode({ nodeName: 'n1' }), 'n1');
  t.equal(targetNode(viewOf(t, speakerPod()).spec), 'node-a');
  const pin = (values: string[]) => ({
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values }] }],
        },
      },
    },
  });
  t.equal(targetNode(pin(['a', 'b'])), undefined);
  t.equal(targetNode({}), undefined);
});

// --- findGuardedContainer

t.test("findGuardedContainer: the annotated container, else the profile's, else the only one", async (t) => {
  const speaker = [c('speaker'), c('frr')];
  t.strictSame(findGuardedContainer('metallb-speaker', l2, {}, speaker), {
    guarded: 'speaker',
    warnings: [],
  });
  t.strictSame(
    findGuardedContainer('metallb-speaker', l2, { 'drainguard.io/guarded-container': 'frr' }, speaker),
    { guarded: 'frr', warnings: [] },
  );
  // Either key is honoured.
  t.strictSame(
    findGuardedContainer('lease', lease, { 'drainguard.io/guarded-container': 'b' }, [c('a'), c('b')]),
    { guarded: 'b', warnings: [] },
  );
  t.strictSame(findGuardedContainer('metallb-speaker', l2, {}, [c('main')]), {
    guarded: 'main',
    warnings: ['drainguard: no container named speaker; guarding main'],
  });
  t.strictSame(findGuardedContainer('lease', lease, {}, [c('app')]), { guarded: 'app', warnings: [] });
  t.strictSame(
    findGuardedContainer('netfilter-cleanup', new Set(['netfilter-cleanup']), {}, [c('a'), c('b')]),
    {
      guarded: undefined,
      warnings: [],
    },
  );
});

t.test(
  'findGuardedContainer: an unknown or missing choice is denied; skupper without its container is skipped',
  async (t) => {
    t.equal(
      denied(
        t,
        findGuardedContainer('metallb-speaker', l2, { 'drainguard.io/guarded-container': 'x' }, [
          c('speaker'),
        ]),
      ),
      'drainguard.io/guarded-container="x": no such container; containers are speaker',
    );
    t.equal(
      denied(t, findGuardedContainer('lease', lease, {}, [c('a'), c('b')])),
      'drainguard.io/leader-container is required: the pod has several containers (a, b)',
    );
    t.strictSame(findGuardedContainer('skupper-router', lease, {}, [c('router')]), {
      skip: 'no-profile',
      warnings: [
        'drainguard: not injected: skupper router pod has no container kube-adaptor; set drainguard.io/leader-container',
      ],
    });
  },
);

// --- resolveLeases, checkMemberlistAnnotation, requireLeases

t.test("resolveLeases: the annotated Leases, else the profile's; a bad list is denied", async (t) => {
  t.strictSame(resolveLeases('skupper-router', {}), ['skupper-site-leader']);
  t.equal(resolveLeases('lease', {}), undefined);
  t.strictSame(resolveLeases('skupper-router', { 'drainguard.io/leases': ' a, ns/b ,' }), ['a', 'ns/b']);
  t.match(
    denied(t, resolveLeases('lease', { 'drainguard.io/leases': 'Bad_Name' })),
    /^drainguard\.io\/leases="Bad_Name": accepted is a comma-separated list of Lease names/,
  );
});

t.test('checkMemberlistAnnotation: only ports the guarded container declares', async (t) => {
  const containers = [
    c('speaker', { ports: [{ containerPort: 7946 }, { containerPort: 7472, hostPort: 7473 }] }),
  ];
  t.equal(checkMemberlistAnnotation({}, 'speaker', containers), undefined);
  t.equal(
    checkMemberlistAnnotation({ 'drainguard.io/memberlist-ports': '7946,7473' }, 'speaker', containers),
    undefined,
  );
  t.equal(
    denied(
      t,
      checkMemberlistAnnotation({ 'drainguard.io/memberlist-ports': '10250' }, 'speaker', containers),
    ),
    'drainguard.io/memberlist-ports="10250": accepted are ports declared by container speaker: 7946, 7472, 7473',
  );
  t.equal(
    denied(t, checkMemberlistAnnotation({ 'drainguard.io/memberlist-ports': '7946' }, undefined, containers)),
    'drainguard.io/memberlist-ports="7946": accepted are ports declared by container (none): (none declared)',
  );
});

t.test('requireLeases: lease handover needs a Lease', async (t) => {
  t.equal(requireLeases('lease', lease, ['l']), undefined);
  t.equal(requireLeases('metallb-speaker', l2, undefined), undefined);
  for (const leases of [undefined, []])
    t.equal(
      denied(t, requireLeases('lease', lease, leases)),
      'drainguard.io/leases is required for profile lease: name the Lease(s) to hand over',
    );
});

// --- choosePort

t.test(
  "choosePort: the profile's default, else the next port nobody uses, bound to loopback on the host network",
  async (t) => {
    t.strictSame(choosePort('metallb-speaker', {}, viewOf(t, speakerPod()).containers, true), {
      port: 7480,
      host: '127.0.0.1',
      metricsPort: 7490,
    });
    // 7482 is taken and 7483 is another profile's default.
    t.strictSame(choosePort('lease', {}, [c('a', { ports: [{ hostPort: 7482 }] })], false), { port: 7484 });
    t.strictSame(choosePort('lease', { 'drainguard.io/port': '9000' }, [], false), { port: 9000 });
    t.strictSame(
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
  },
);

t.test(
  'choosePort: on the host network a /metrics-only port of its own, annotated or the first free from the profile default',
  async (t) => {
    const speaker = viewOf(t, speakerPod()).containers;
    t.strictSame(
      choosePort(
        'netfilter-cleanup',
        {},
        [c('a', { ports: [{ containerPort: 7493, hostPort: 7493 }] })],
        true,
      ),
      // 7493 is taken; 7494 is free (the next profiles' defaults are below it).
      { port: 7483, host: '127.0.0.1', metricsPort: 7494 },
    );
    t.strictSame(choosePort('metallb-speaker', { 'drainguard.io/metrics-port': '9101' }, speaker, true), {
      port: 7480,
      host: '127.0.0.1',
      metricsPort: 9101,
    });
    // Never the sidecar's own port, though it is bound to another address.
    t.strictSame(choosePort('lease', { 'drainguard.io/port': '7492' }, [], true), {
      port: 7492,
      host: '127.0.0.1',
      metricsPort: 7494,
    });
    t.equal(
      denied(t, choosePort('metallb-speaker', { 'drainguard.io/metrics-port': '7472' }, speaker, true)),
      'drainguard.io/metrics-port=7472: port 7472 is already used by container speaker; choose another port',
    );
    t.equal(
      denied(
        t,
        choosePort('lease', { 'drainguard.io/port': '9000', 'drainguard.io/metrics-port': '9000' }, [], true),
      ),
      "drainguard.io/metrics-port=9000: port 9000 is the sidecar's own port (drainguard.io/port); choose another port",
    );
    t.equal(
      denied(t, choosePort('lease', { 'drainguard.io/metrics-port': 'x' }, [], true)),
      'drainguard.io/metrics-port="x": accepted is 0 (no /metrics listener on the node) or a whole number from 1024 to 65535',
    );
    // "0": no listener on the node, so no hostPort (a DaemonSet rolling out with maxSurge needs that).
    t.strictSame(choosePort('netfilter-cleanup', { 'drainguard.io/metrics-port': '0' }, [], true), {
      port: 7483,
      host: '127.0.0.1',
    });
    // Off the host network /metrics is on the pod's own IP with everything else: no second port.
    t.strictSame(choosePort('lease', { 'drainguard.io/metrics-port': '9101' }, [], false), { port: 7482 });
  },
);

t.test('metricsPortWarnings: the annotation off the host network is ignored, and says so', async (t) => {
  t.strictSame(metricsPortWarnings({ 'drainguard.io/metrics-port': '9101' }, { port: 7482 }), [
    'drainguard: drainguard.io/metrics-port is used on hostNetwork pods only and was ignored: this pod serves /metrics with the rest on its drainguard port 7482',
  ]);
  t.strictSame(metricsPortWarnings({}, { port: 7482 }), []);
  t.strictSame(
    metricsPortWarnings(
      { 'drainguard.io/metrics-port': '9101' },
      { port: 7480, host: '127.0.0.1', metricsPort: 9101 },
    ),
    [],
  );
  t.strictSame(
    metricsPortWarnings({ 'drainguard.io/metrics-port': '0' }, { port: 7483, host: '127.0.0.1' }),
    [],
  );
});

t.test('choosePort: a bad or used annotated port is denied, and so is a pod with no port left', async (t) => {
  for (const bad of ['80', 'abc', '70000', '9000.5', ''])
    t.equal(
      denied(t, choosePort('lease', { 'drainguard.io/port': bad }, [], false)),
      `drainguard.io/port=${JSON.stringify(bad)}: accepted is a whole number from 1024 to 65535`,
    );
  t.equal(
    denied(
      t,
      choosePort(
        'metallb-speaker',
        { 'drainguard.io/port': '7946' },
        viewOf(t, speakerPod()).containers,
        true,
      ),
    ),
    'drainguard.io/port=7946: port 7946 is already used by container speaker; choose another port',
  );
  const every = Array.from({ length: 65536 - 7480 }, (_, i) => ({ containerPort: 7480 + i }));
  t.equal(
    denied(t, choosePort('metallb-speaker', {}, [c('greedy', { ports: every })], true)),
    'no free port for the sidecar',
  );
});

// --- buildEnv

const envInputs = (more: Partial<EnvInputs> = {}): EnvInputs => ({
  profile: 'metallb-speaker',
  features: l2,
  settings: {},
  endpoint: { port: 7480, host: '127.0.0.1', metricsPort: 7490 },
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
const envValues = (t: Test, env: unknown): Record<string, string | undefined> => {
  t.ok(!isStop(env), `expected an env, got ${JSON.stringify(env)}`);
  return Object.fromEntries((env as EnvVar[]).map((e) => [e.name, e.value]));
};

t.test(
  'buildEnv: what the webhook decided, with the memberlist ports and namespace taken from the pod',
  async (t) => {
    const settings = { handoverBudgetSeconds: 45 };
    const env = envValues(t, buildEnv(envInputs({ settings })));
    t.equal(env.DRAINGUARD_PROFILE, 'metallb-speaker');
    t.equal(env.DRAINGUARD_FEATURES, 'l2-handover');
    t.equal(env.DRAINGUARD_PORT, undefined, '7480, the default');
    t.equal(env.DRAINGUARD_BIND_ADDRESS, '127.0.0.1');
    t.equal(env.DRAINGUARD_METRICS_PORT, '7490');
    const raw = buildEnv(envInputs({ settings })) as EnvVar[];
    t.strictSame(
      raw.find((e) => e.name === 'DRAINGUARD_METRICS_ADDRESS'),
      { name: 'DRAINGUARD_METRICS_ADDRESS', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } },
      "the node's IP, from the downward API",
    );
    t.equal(env.DRAINGUARD_GUARDED_CONTAINER, 'speaker');
    t.equal(env.DRAINGUARD_MEMBERLIST_PORTS, '7947');
    t.equal(env.DRAINGUARD_METALLB_NAMESPACE, 'lb');
    t.equal(env.DRAINGUARD_HANDOVER_BUDGET_SECONDS, '45');
    t.strictSame(settings, { handoverBudgetSeconds: 45 }, 'the input settings are not changed');
    // Annotated settings win over what the pod implies.
    const annotated = envValues(
      t,
      buildEnv(envInputs({ settings: { memberlistPorts: [7472], metallbNamespace: 'other' } })),
    );
    t.equal(annotated.DRAINGUARD_MEMBERLIST_PORTS, '7472');
    t.equal(annotated.DRAINGUARD_METALLB_NAMESPACE, 'other');
    const skupper = envValues(
      t,
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
    t.equal(skupper.DRAINGUARD_LEASES, 'skupper-site-leader');
    t.equal(skupper.DRAINGUARD_SUCCESSOR_SELECTOR, 'skupper.io/component=router');
    t.equal(skupper.DRAINGUARD_BIND_ADDRESS, undefined);
    t.equal('DRAINGUARD_METRICS_PORT' in skupper, false);
    t.equal('DRAINGUARD_METRICS_ADDRESS' in skupper, false);
    t.equal(skupper.DRAINGUARD_MEMBERLIST_PORTS, undefined);
  },
);

t.test('buildEnv: settings the sidecar would reject are denied', async (t) => {
  t.equal(
    denied(t, buildEnv(envInputs({ profile: 'lease', features: lease, leases: undefined }))),
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

t.test(
  'buildSidecar: classic off the host network: a declared port, non-root, no capabilities',
  async (t) => {
    const { container: s, volume } = buildSidecar(sidecarInputs()) as { container: Obj; volume: Obj };
    t.equal(s.name, 'drainguard');
    t.equal(s.image, 'img:1');
    t.strictSame(s.env, [{ name: 'DRAINGUARD_PROFILE', value: 'lease' }]);
    t.strictSame(s.ports, [{ name: 'drainguard', containerPort: 7482, protocol: 'TCP' }]);
    t.strictSame(s.readinessProbe.httpGet, { path: '/readyz', port: 7482, scheme: 'HTTP' });
    t.equal(s.livenessProbe.httpGet.path, '/healthz');
    t.equal(s.restartPolicy, undefined);
    t.equal(s.securityContext.runAsNonRoot, true);
    t.strictSame(s.securityContext.capabilities, { drop: ['ALL'] });
    t.strictSame(volume, { name: 'drainguard-tmp', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } });
    t.strictSame(s.volumeMounts, [{ name: 'drainguard-tmp', mountPath: '/tmp' }]);
  },
);

t.test(
  'buildSidecar: native on the host network: only the /metrics port declared, probes on loopback, NET_ADMIN for netfilter',
  async (t) => {
    const { container: s, volume } = buildSidecar(
      sidecarInputs({
        endpoint: { port: 7480, host: '127.0.0.1', metricsPort: 7490 },
        hostNetwork: true,
        native: true,
        features: l2,
        volumes: [{ name: 'drainguard-tmp' }, { name: 'drainguard-tmp-1' }],
      }),
    ) as { container: Obj; volume: Obj };
    // Named as off the host network, so one PodMonitor endpoint scrapes both; a hostNetwork pod's
    // hostPort must equal its containerPort.
    t.strictSame(s.ports, [
      { name: SIDECAR_PORT_NAME, containerPort: 7490, hostPort: 7490, protocol: 'TCP' },
    ]);
    t.equal(s.restartPolicy, 'Always');
    t.strictSame(s.readinessProbe.httpGet, {
      path: '/readyz',
      port: 7480,
      host: '127.0.0.1',
      scheme: 'HTTP',
    });
    t.equal(s.securityContext.runAsUser, 0);
    t.strictSame(s.securityContext.capabilities, { drop: ['ALL'], add: ['NET_ADMIN'] });
    t.equal(volume.name, 'drainguard-tmp-2');
    t.equal(s.volumeMounts[0].name, 'drainguard-tmp-2');
  },
);

// --- buildPatch and its builders

const sidecar = { container: { name: 'drainguard' }, volume: { name: 'drainguard-tmp' } };

t.test(
  'sidecarOps: native goes first among the init containers, classic last among the containers',
  async (t) => {
    t.strictSame(sidecarOps({ initContainers: [], volumes: [] }, sidecar, true), [
      { op: 'add', path: '/spec/initContainers/0', value: sidecar.container },
      { op: 'add', path: '/spec/volumes/-', value: sidecar.volume },
    ]);
    t.strictSame(sidecarOps({}, sidecar, true), [
      { op: 'add', path: '/spec/initContainers', value: [sidecar.container] },
      { op: 'add', path: '/spec/volumes', value: [sidecar.volume] },
    ]);
    t.strictSame(sidecarOps({ initContainers: [] }, sidecar, false)[0], {
      op: 'add',
      path: '/spec/containers/-',
      value: sidecar.container,
    });
  },
);

t.test('preStopOps: a preStop on the guarded container, an existing one kept with a warning', async (t) => {
  const endpoint = { port: 7480, host: '127.0.0.1' };
  const preStop = { httpGet: { path: '/prestop', port: 7480, host: '127.0.0.1', scheme: 'HTTP' } };
  t.strictSame(preStopOps('metallb-speaker', [c('x'), c('speaker')], 'speaker', endpoint), {
    ops: [{ op: 'add', path: '/spec/containers/1/lifecycle', value: { preStop } }],
    warnings: [],
  });
  t.strictSame(
    preStopOps('metallb-speaker', [c('speaker', { lifecycle: { postStart: {} } })], 'speaker', endpoint),
    {
      ops: [{ op: 'add', path: '/spec/containers/0/lifecycle/preStop', value: preStop }],
      warnings: [],
    },
  );
  t.strictSame(
    preStopOps('metallb-speaker', [c('speaker', { lifecycle: { preStop: {} } })], 'speaker', endpoint),
    {
      ops: [],
      warnings: [
        'drainguard: container speaker already has a preStop hook; kept it, handover is not awaited',
      ],
    },
  );
  t.strictSame(preStopOps('skupper-router', [c('kube-adaptor')], 'kube-adaptor', endpoint), {
    ops: [],
    warnings: [],
  });
  t.strictSame(preStopOps('metallb-speaker', [c('speaker')], undefined, endpoint), {
    ops: [],
    warnings: [],
  });
});

t.test(
  'processNamespaceOps: the Lease and L2 handovers share the PID namespace; an explicit false is kept with a warning',
  async (t) => {
    t.strictSame(processNamespaceOps({}, lease), {
      ops: [{ op: 'add', path: '/spec/shareProcessNamespace', value: true }],
      warnings: [],
    });
    t.strictSame(processNamespaceOps({ shareProcessNamespace: true }, lease), { ops: [], warnings: [] });
    const kept = processNamespaceOps({ shareProcessNamespace: false }, lease);
    t.strictSame(kept.ops, []);
    t.match(kept.warnings[0] ?? '', /^drainguard: shareProcessNamespace is false: /);
    t.strictSame(processNamespaceOps({}, l2), {
      ops: [{ op: 'add', path: '/spec/shareProcessNamespace', value: true }],
      warnings: [],
    });
    t.match(
      processNamespaceOps({ shareProcessNamespace: false }, l2).warnings[0] ?? '',
      /a speaker that crashes is handed over only once the kubelet reports it stopped/,
    );
    t.strictSame(processNamespaceOps({}, new Set()), { ops: [], warnings: [] }, 'netfilter cleanup alone');
  },
);

t.test(
  'graceOps: the grace period raised to budget + 5 s, the old value kept in an annotation',
  async (t) => {
    t.strictSame(graceOps('metallb-speaker', { terminationGracePeriodSeconds: 0 }, 30), {
      ops: [{ op: 'add', path: '/spec/terminationGracePeriodSeconds', value: 35 }],
      warnings: [
        'drainguard: terminationGracePeriodSeconds raised from 0 to 35 to cover the 30 s handover budget',
      ],
      annotations: { 'drainguard.io/original-termination-grace-period-seconds': '0' },
    });
    const unset = graceOps('lease', {}, 60);
    t.equal(
      unset.warnings[0],
      'drainguard: terminationGracePeriodSeconds raised from default 30 to 65 to cover the 60 s handover budget',
    );
    t.strictSame(unset.annotations, { 'drainguard.io/original-termination-grace-period-seconds': 'unset' });
    const none = { ops: [], warnings: [], annotations: {} };
    t.strictSame(graceOps('lease', { terminationGracePeriodSeconds: 35 }, 30), none);
    t.strictSame(graceOps('netfilter-cleanup', { terminationGracePeriodSeconds: 0 }, 30), none);
  },
);

t.test('annotationOps: into the existing map (keys escaped), as a new map, or in new metadata', async (t) => {
  const added = { 'a~b/c': '1', 'drainguard.io/status': '{}' };
  t.strictSame(annotationOps({ hasMetadata: true, hasAnnotations: true }, added), [
    { op: 'add', path: '/metadata/annotations/a~0b~1c', value: '1' },
    { op: 'add', path: '/metadata/annotations/drainguard.io~1status', value: '{}' },
  ]);
  t.strictSame(annotationOps({ hasMetadata: true, hasAnnotations: false }, added), [
    { op: 'add', path: '/metadata/annotations', value: added },
  ]);
  t.strictSame(annotationOps({ hasMetadata: false, hasAnnotations: false }, added), [
    { op: 'add', path: '/metadata', value: { annotations: added } },
  ]);
});

t.test('buildPatch: the builders in order, the status annotation last, new metadata first', async (t) => {
  const pod = viewOf(t, skupperPod(), 'site');
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
  t.strictSame(
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
  t.strictSame(Object.keys(p.annotations), [
    'drainguard.io/original-termination-grace-period-seconds',
    'drainguard.io/status',
  ]);
  t.strictSame(JSON.parse(p.annotations['drainguard.io/status'] ?? ''), {
    version: '9.9.9',
    profile: 'skupper-router',
    features: ['lease-handover'],
    mode: 'native',
    port: 7481,
    container: 'drainguard',
  });
  t.strictSame(p.warnings, [
    'drainguard: terminationGracePeriodSeconds raised from default 30 to 35 to cover the 30 s handover budget',
  ]);
  const bare = buildPatch({ ...inputs, pod: { ...pod, hasMetadata: false, hasAnnotations: false } });
  t.equal(bare.patch[0]?.path, '/metadata');
  t.equal(bare.patch.length, 5);
});
