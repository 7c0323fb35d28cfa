// Every overlay renders with `kubectl kustomize` and is accepted by a real API server (server-side
// dry run; minimal cert-manager CRDs installed). Kinds newer than that 1.20 server (policy/v1
// PodDisruptionBudget) are validated against their schema. `kubectl auth can-i` proves the RBAC
// grants what the webhook and the sidecars need, and nothing wider.
import { join } from 'node:path';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import t from 'tap';
import YAML from 'yaml';
import { type ControlPlane, startControlPlane } from '../../../lab/bed/control-plane.ts';
import { waitFor } from '../../../shared/clock.ts';

const manifests = join(import.meta.dirname, '../../../manifests');
let cp: ControlPlane;

const crd = (kind: string, plural: string, group = 'cert-manager.io', version = 'v1') => ({
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `${plural}.${group}` },
  spec: {
    group,
    scope: 'Namespaced',
    names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
    versions: [
      {
        name: version,
        served: true,
        storage: true,
        schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
      },
    ],
  },
});

t.before(async () => {
  cp = await startControlPlane();
  const input = [
    crd('Issuer', 'issuers'),
    crd('Certificate', 'certificates'),
    // MetalLB's kind, so `kubectl auth can-i` can resolve it.
    crd('ServiceL2Status', 'servicel2statuses', 'metallb.io', 'v1beta1'),
    crd('IPAddressPool', 'ipaddresspools', 'metallb.io', 'v1beta1'),
    crd('L2Advertisement', 'l2advertisements', 'metallb.io', 'v1beta1'),
  ]
    .map((d) => YAML.stringify(d))
    .join('---\n');
  const r = await cp.kubectl(['apply', '-f', '-'], { input });
  t.equal(r.code, 0, r.stderr);
  await waitFor(
    'cert-manager CRDs served',
    async () =>
      (await cp.kubectl(['get', 'certificates.cert-manager.io', '-A'])).code === 0 &&
      (await cp.kubectl(['get', 'servicel2statuses.metallb.io', '-A'])).code === 0 &&
      (await cp.kubectl(['get', 'l2advertisements.metallb.io', '-A'])).code === 0 &&
      (await cp.kubectl(['get', 'ipaddresspools.metallb.io', '-A'])).code === 0,
    { timeoutMs: 20_000, intervalMs: 200 },
  );
  for (const ns of ['drainguard-system', 'metallb-system', 'site-a', 'site-b'])
    t.equal((await cp.kubectl(['create', 'namespace', ns])).code, 0);
});
t.teardown(async () => {
  await cp?.stop();
});

async function render(overlay: string): Promise<Record<string, unknown>[]> {
  const r = await cp.kubectl(['kustomize', join(manifests, overlay)]);
  if (r.code !== 0) throw new Error(`kubectl kustomize ${overlay}: ${r.stderr}`);
  return YAML.parseAllDocuments(r.stdout).map((d) => d.toJSON() as Record<string, unknown>);
}

for (const overlay of ['overlays/cert-manager', 'overlays/self-managed']) {
  t.test(`${overlay}: renders and the API server accepts every object (dry run)`, async (t) => {
    const docs = await render(overlay);
    const kinds = docs.map((d) => d.kind).sort();
    for (const k of [
      'Deployment',
      'MutatingWebhookConfiguration',
      'NetworkPolicy',
      'PodDisruptionBudget',
      'PriorityClass',
      'Service',
      'ServiceAccount',
    ])
      t.ok(kinds.includes(k), `${overlay} lacks ${k}`);
    const newer = docs.filter((d) => d.apiVersion === 'policy/v1');
    for (const d of newer)
      new PodDisruptionBudget(d as ConstructorParameters<typeof PodDisruptionBudget>[0]).validate();
    const rest = docs.filter((d) => d.apiVersion !== 'policy/v1' && d.kind !== 'Namespace');
    const input = rest.map((d) => YAML.stringify(d)).join('---\n');
    const r = await cp.kubectl(['apply', '--dry-run=server', '-f', '-'], { input });
    t.equal(r.code, 0, `${overlay}: ${r.stderr}`);
    t.equal(r.stdout.trim().split('\n').length, rest.length, r.stdout);

    const mwc = docs.find((d) => d.kind === 'MutatingWebhookConfiguration') as {
      metadata: { annotations?: Record<string, string> };
      webhooks: Record<string, unknown>[];
    };
    const hook = mwc.webhooks[0]!;
    t.equal(hook.sideEffects, 'None');
    t.equal(hook.failurePolicy, 'Fail');
    t.equal(hook.reinvocationPolicy, 'IfNeeded');
    t.equal(hook.timeoutSeconds, 5);
    t.equal(hook.matchPolicy, 'Equivalent');
    if (overlay.endsWith('cert-manager')) {
      // selfSigned Issuer -> CA Certificate -> CA Issuer -> serving Certificate; the caBundle is
      // the CA, so renewing the serving pair never changes what the API server trusts.
      type Cert = {
        metadata: { name: string };
        spec: { isCA?: boolean; secretName: string; issuerRef: { name: string } };
      };
      type Issuer = {
        metadata: { name: string };
        spec: { selfSigned?: object; ca?: { secretName: string } };
      };
      const certs = docs.filter((d) => d.kind === 'Certificate') as Cert[];
      const issuers = docs.filter((d) => d.kind === 'Issuer') as Issuer[];
      const issuer = (name: string) => issuers.find((i) => i.metadata.name === name);
      const ca = certs.find((c) => c.spec.isCA);
      const serving = certs.find((c) => !c.spec.isCA);
      if (!ca || !serving) throw new Error('no CA Certificate and serving Certificate');
      t.ok(issuer(ca.spec.issuerRef.name)?.spec.selfSigned, 'the CA is self-signed');
      t.equal(issuer(serving.spec.issuerRef.name)?.spec.ca?.secretName, ca.spec.secretName);
      t.equal(
        mwc.metadata.annotations?.['cert-manager.io/inject-ca-from'],
        `drainguard-system/${ca.metadata.name}`,
      );
    }
    const dep = docs.find((d) => d.kind === 'Deployment') as {
      spec: {
        replicas: number;
        template: {
          metadata: { labels: Record<string, string> };
          spec: {
            priorityClassName?: string;
            terminationGracePeriodSeconds?: number;
            containers: {
              name: string;
              env?: { name: string; valueFrom?: { fieldRef?: { fieldPath?: string } } }[];
            }[];
          };
        };
      };
    };
    t.equal(dep.spec.replicas, 2);
    // The injected image is the webhook's own (read from its pod): one image setting, no env copy.
    const env = dep.spec.template.spec.containers.find((c) => c.name === 'webhook')?.env ?? [];
    t.equal(
      env.find((e) => e.name === 'DRAINGUARD_SIDECAR_IMAGE'),
      undefined,
    );
    t.equal(
      env.find((e) => e.name === 'DRAINGUARD_WEBHOOK_POD_NAME')?.valueFrom?.fieldRef?.fieldPath,
      'metadata.name',
    );
    // Scheduled ahead of the workloads it admits; graceful drain (15 s) fits in the grace period.
    const pc = docs.find((d) => d.kind === 'PriorityClass') as { metadata: { name: string } };
    t.equal(dep.spec.template.spec.priorityClassName, pc.metadata.name);
    t.ok((dep.spec.template.spec.terminationGracePeriodSeconds ?? 30) > 15);
    const np = docs.find((d) => d.kind === 'NetworkPolicy') as {
      spec: { policyTypes: string[]; ingress: { ports: { port: number; protocol: string }[] }[] };
    };
    t.strictSame(np.spec.policyTypes, ['Ingress']);
    t.strictSame(np.spec.ingress, [{ ports: [{ port: 8443, protocol: 'TCP' }] }]);
    t.equal(dep.spec.template.metadata.labels['drainguard.io/inject'], 'disabled');
    // Pod Security `restricted` on the webhook's namespace, and the webhook's pod meets it.
    const ns = docs.find((d) => d.kind === 'Namespace') as { metadata: { labels: Record<string, string> } };
    t.equal(ns.metadata.labels['pod-security.kubernetes.io/enforce'], 'restricted');
    const podSpec = dep.spec.template.spec as unknown as {
      securityContext: { runAsNonRoot?: boolean; seccompProfile?: { type?: string } };
      containers: {
        securityContext?: {
          allowPrivilegeEscalation?: boolean;
          capabilities?: { drop?: string[]; add?: string[] };
        };
      }[];
    };
    t.equal(podSpec.securityContext.runAsNonRoot, true);
    t.equal(podSpec.securityContext.seccompProfile?.type, 'RuntimeDefault');
    for (const ctr of podSpec.containers) {
      t.equal(ctr.securityContext?.allowPrivilegeEscalation, false);
      t.strictSame(ctr.securityContext?.capabilities?.drop, ['ALL']);
      t.equal(ctr.securityContext?.capabilities?.add, undefined);
    }
  });
}

async function can(user: string, verb: string, resource: string, ns?: string): Promise<boolean> {
  const r = await cp.kubectl(['auth', 'can-i', verb, resource, '--as', user, ...(ns ? ['-n', ns] : [])]);
  return r.stdout.trim() === 'yes';
}

t.test('RBAC: what the webhook and each sidecar profile need, and nothing wider', async (t) => {
  const docs = [
    ...(await render('overlays/self-managed')),
    ...(await render('sidecar-rbac/metallb-namespace')),
  ];
  const rbac = docs.filter((d) => String(d.apiVersion).startsWith('rbac.'));
  const r = await cp.kubectl(['apply', '-f', '-'], {
    input: rbac.map((d) => YAML.stringify(d)).join('---\n'),
  });
  t.equal(r.code, 0, r.stderr);
  // The documented per-site commands for skupper (docs/webhook.md).
  for (const args of [
    ['apply', '-n', 'site-a', '-f', join(manifests, 'sidecar-rbac/skupper-site/role.yaml')],
    [
      'create',
      'rolebinding',
      'drainguard-sidecar-lease',
      '-n',
      'site-a',
      '--role=drainguard-sidecar-skupper',
      '--serviceaccount=site-a:skupper-router',
    ],
    [
      'create',
      'clusterrolebinding',
      'drainguard-sidecar-nodes-site-a',
      '--clusterrole=drainguard-sidecar-nodes',
      '--serviceaccount=site-a:skupper-router',
    ],
  ])
    t.equal((await cp.kubectl(args)).code, 0);

  const expect = async (user: string, rows: [string, string, string | undefined, boolean][]) => {
    for (const [verb, res, ns, want] of rows)
      t.equal(
        await can(user, verb, res, ns),
        want,
        `${user} ${verb} ${res}${ns ? ` -n ${ns}` : ''} should be ${want}`,
      );
  };
  await expect('system:serviceaccount:drainguard-system:drainguard-webhook', [
    ['list', 'nodes', undefined, true],
    ['watch', 'nodes', undefined, true],
    ['patch', 'nodes', undefined, false],
    ['get', 'secrets/drainguard-webhook-tls', 'drainguard-system', true],
    ['update', 'secrets/drainguard-webhook-tls', 'drainguard-system', true],
    // The overlay ships the Secret: no create (RBAC cannot narrow create to one name).
    ['create', 'secrets', 'drainguard-system', false],
    ['get', 'secrets/other', 'drainguard-system', false],
    ['list', 'secrets', 'drainguard-system', false],
    ['get', 'secrets/drainguard-webhook-tls', 'default', false],
    ['update', 'mutatingwebhookconfigurations.admissionregistration.k8s.io/drainguard', undefined, true],
    ['update', 'mutatingwebhookconfigurations.admissionregistration.k8s.io/other', undefined, false],
    ['list', 'pods', 'default', false],
    // Its own pod, for the image it injects; nothing more on pods.
    ['get', 'pods', 'drainguard-system', true],
    ['list', 'pods', 'drainguard-system', false],
    ['get', 'pods', 'default', false],
  ]);
  for (const sa of ['speaker', 'metallb-speaker'])
    await expect(`system:serviceaccount:metallb-system:${sa}`, [
      ['patch', 'nodes', undefined, true],
      ['watch', 'nodes', undefined, true],
      ['delete', 'nodes', undefined, false],
      ['update', 'nodes', undefined, false],
      ['list', 'servicel2statuses.metallb.io', 'metallb-system', true],
      ['watch', 'pods', 'metallb-system', true],
      ['list', 'pods', 'default', false],
      ['delete', 'servicel2statuses.metallb.io', 'metallb-system', false],
      ['list', 'services', 'default', true],
      // Per-service eligibility, read when a handover starts.
      ['list', 'endpointslices.discovery.k8s.io', 'default', true],
      ['watch', 'endpointslices.discovery.k8s.io', 'default', false],
      ['list', 'ipaddresspools.metallb.io', 'metallb-system', true],
      ['list', 'l2advertisements.metallb.io', 'metallb-system', true],
      ['update', 'l2advertisements.metallb.io', 'metallb-system', false],
      ['create', 'events', 'default', true],
      ['get', 'secrets', 'metallb-system', false],
      ['update', 'leases.coordination.k8s.io', 'metallb-system', false],
    ]);
  await expect('system:serviceaccount:site-a:skupper-router', [
    // Writes only to skupper's own Lease.
    ['update', 'leases.coordination.k8s.io/skupper-site-leader', 'site-a', true],
    ['update', 'leases.coordination.k8s.io/other-leader', 'site-a', false],
    ['get', 'leases.coordination.k8s.io/other-leader', 'site-a', true],
    ['watch', 'leases.coordination.k8s.io', 'site-a', true],
    ['create', 'leases.coordination.k8s.io', 'site-a', false],
    ['patch', 'leases.coordination.k8s.io', 'site-a', false],
    ['delete', 'leases.coordination.k8s.io', 'site-a', false],
    ['update', 'leases.coordination.k8s.io', 'site-b', false],
    ['list', 'pods', 'site-a', true],
    ['list', 'pods', 'site-b', false],
    ['list', 'nodes', undefined, true],
    ['patch', 'nodes', undefined, false],
  ]);
  // A site that was not bound gets nothing.
  await expect('system:serviceaccount:site-b:skupper-router', [
    ['update', 'leases.coordination.k8s.io', 'site-b', false],
  ]);
});
