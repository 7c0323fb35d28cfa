// The opt-in ValidatingAdmissionPolicy (manifests/components/node-guard) cannot run on the 1.20
// test API server: its objects are checked against the 1.30 schema (kubernetes-models), and every
// CEL expression is evaluated, as the API server would, on admission requests shaped like the
// ones the L2 sidecar's merge patches produce (sidecar/l2/own-node.ts) — allowed and refused.
import { readFileSync } from 'node:fs';
import { run } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import {
  ValidatingAdmissionPolicy,
  ValidatingAdmissionPolicyBinding,
} from 'kubernetes-models/admissionregistration.k8s.io/v1';
import t, { type Test } from 'tap';
import YAML from 'yaml';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION, LABEL_OWNED_ANNOTATION } from '../../../shared/names.ts';

const dir = new URL('../../../manifests/components/node-guard/', import.meta.url);
const docs = YAML.parseAllDocuments(readFileSync(new URL('policy.yaml', dir), 'utf8')).map(
  (d) => d.toJSON() as Record<string, unknown>,
);
type Expr = { name?: string; expression: string; message?: string };
const policy = docs.find((d) => d.kind === 'ValidatingAdmissionPolicy') as {
  spec: { matchConditions: Expr[]; variables: Expr[]; validations: Expr[] };
};
const binding = docs.find((d) => d.kind === 'ValidatingAdmissionPolicyBinding') as {
  spec: { policyName: string; validationActions: string[] };
};

/** JSON to CEL input: objects become maps, as the API server presents unstructured objects. */
const toCel = (v: unknown): unknown =>
  Array.isArray(v)
    ? v.map(toCel)
    : v && typeof v === 'object'
      ? new Map(Object.entries(v).map(([k, x]) => [k, toCel(x)]))
      : v;

interface Request {
  username: string;
  nodeClaim?: string;
  oldObject: Record<string, unknown>;
  object: Record<string, unknown>;
}

/** The API server's order: match conditions, then variables (lazily, here in order), then validations. */
function admit(t: Test, r: Request): { matched: boolean; denied: string[] } {
  const request = toCel({
    operation: 'UPDATE',
    userInfo: {
      username: r.username,
      extra: r.nodeClaim ? { 'authentication.kubernetes.io/node-name': [r.nodeClaim] } : {},
    },
  });
  const base = { request, object: toCel(r.object), oldObject: toCel(r.oldObject) };
  const evalBool = (e: Expr, vars: Map<string, unknown>) => {
    const out = run(e.expression, { ...base, variables: vars } as never, { funcs: strings });
    t.equal(typeof out, 'boolean', `${e.name ?? e.message}: not a bool (${String(out)})`);
    return out as boolean;
  };
  const vars = new Map<string, unknown>();
  if (!policy.spec.matchConditions.every((m) => evalBool(m, vars))) return { matched: false, denied: [] };
  for (const v of policy.spec.variables)
    vars.set(v.name as string, run(v.expression, { ...base, variables: vars } as never, { funcs: strings }));
  return {
    matched: true,
    denied: policy.spec.validations.filter((v) => !evalBool(v, vars)).map((v) => v.message ?? ''),
  };
}

const node = (name: string, over: { labels?: object; annotations?: object; spec?: object } = {}) => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: {
    name,
    labels: { 'kubernetes.io/hostname': name, ...over.labels },
    annotations: { 'node.alpha.kubernetes.io/ttl': '0', ...over.annotations },
  },
  spec: { podCIDR: '10.244.1.0/24', ...over.spec },
});
const speaker = 'system:serviceaccount:metallb-system:speaker';

t.test(
  'node-guard objects are valid ValidatingAdmissionPolicy/Binding (admissionregistration.k8s.io/v1, Kubernetes 1.30 schema)',
  async (t) => {
    t.doesNotThrow(() => new ValidatingAdmissionPolicy(docs[0] as never).validate());
    t.doesNotThrow(() => new ValidatingAdmissionPolicyBinding(docs[1] as never).validate());
    t.equal(binding.spec.policyName, (docs[0] as { metadata: { name: string } }).metadata.name);
    t.strictSame(binding.spec.validationActions, ['Deny']);
    const kustomization = YAML.parse(readFileSync(new URL('kustomization.yaml', dir), 'utf8'));
    t.equal(kustomization.kind, 'Component');
  },
);

t.test(
  "allowed: the sidecar's own label, ownership and status annotations on its own Node, and taking them off",
  async (t) => {
    const before = node('node-a');
    const labelled = node('node-a', {
      labels: { [EXCLUDE_LABEL]: '' },
      annotations: { [LABEL_OWNED_ANNOTATION]: 'true', [L2_STATE_ANNOTATION]: '{"phase":"labelled"}' },
    });
    for (const [oldObject, object] of [
      [before, labelled],
      [labelled, before],
    ] as const)
      t.strictSame(admit(t, { username: speaker, nodeClaim: 'node-a', oldObject, object }), {
        matched: true,
        denied: [],
      });
    // The Helm chart's account name too.
    t.strictSame(
      admit(t, {
        username: 'system:serviceaccount:metallb-system:metallb-speaker',
        nodeClaim: 'node-a',
        oldObject: before,
        object: labelled,
      }).denied,
      [],
    );
  },
);

t.test(
  'refused: another Node, no node-name claim, a spec change (taint, cordon), another label or annotation',
  async (t) => {
    const denied = (r: Omit<Request, 'username'>) => admit(t, { username: speaker, ...r }).denied.join(' | ');
    const a = node('node-a');
    t.match(
      denied({
        nodeClaim: 'node-b',
        oldObject: a,
        object: node('node-a', { labels: { [EXCLUDE_LABEL]: '' } }),
      }),
      /only the Node its pod runs on/,
    );
    t.match(
      denied({ oldObject: a, object: node('node-a', { labels: { [EXCLUDE_LABEL]: '' } }) }),
      /only the Node its pod runs on/,
    );
    t.match(
      denied({
        nodeClaim: 'node-a',
        oldObject: a,
        object: node('node-a', { spec: { taints: [{ key: 'x', effect: 'NoSchedule' }] } }),
      }),
      /may not change a Node's spec/,
    );
    t.match(
      denied({
        nodeClaim: 'node-a',
        oldObject: a,
        object: node('node-a', { spec: { unschedulable: true } }),
      }),
      /spec/,
    );
    t.match(
      denied({
        nodeClaim: 'node-a',
        oldObject: a,
        object: node('node-a', { labels: { 'node-role.kubernetes.io/control-plane': '' } }),
      }),
      /only the label node\.kubernetes\.io\/exclude-from-external-load-balancers/,
    );
    // Removing or changing someone else's label is a change too.
    const { labels: _drop, ...bare } = a.metadata;
    t.match(
      denied({ nodeClaim: 'node-a', oldObject: a, object: { ...a, metadata: { ...bare, labels: {} } } }),
      /only the label/,
    );
    t.match(
      denied({
        nodeClaim: 'node-a',
        oldObject: a,
        object: node('node-a', { annotations: { 'node.alpha.kubernetes.io/ttl': '30' } }),
      }),
      /only drainguard\.io\/ annotations/,
    );
  },
);

t.test('other users are not matched (kubelet, controllers, kubectl)', async (t) => {
  for (const username of ['system:node:node-a', 'system:serviceaccount:kube-system:node-controller', 'admin'])
    t.strictSame(
      admit(t, {
        username,
        oldObject: node('node-a'),
        object: node('node-a', { spec: { unschedulable: true } }),
      }),
      { matched: false, denied: [] },
    );
});
