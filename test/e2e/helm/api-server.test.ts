// The chart with real helm (4.1.4 and 3.17.2) against a real API server at the lab's version (etcd +
// kube-apiserver, no kubelets): what `helm template` renders for that version is accepted by the
// server's dry run, every optional part on (the node guard's ValidatingAdmissionPolicy among them);
// then `helm install` (helm reads the server's version against the chart's kubeVersion), `helm upgrade` (image tag and a value),
// `helm uninstall` leaving nothing behind, and the order helm deletes in, read from the API
// server's audit log: helm 4 deletes the MutatingWebhookConfiguration before the Deployment and
// the Service; helm 3.17 after them (the README says so and what to do).
import { readFileSync } from 'node:fs';
import t from 'tap';
import YAML from 'yaml';
import { APISERVER_VERSION, type ControlPlane, startControlPlane } from '../../../lab/bed/control-plane.ts';
import { waitFor } from '../../../shared/clock.ts';
import { CHART, CHART_KINDS, HELMS, parseDocs, releaseObjects, run, tool } from '../../unit/helm/render.ts';

let cp: ControlPlane;

const crd = (kind: string, plural: string, group: string, version = 'v1') => ({
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
const CRDS = [
  crd('Issuer', 'issuers', 'cert-manager.io'),
  crd('Certificate', 'certificates', 'cert-manager.io'),
  crd('PodMonitor', 'podmonitors', 'monitoring.coreos.com'),
  crd('ServiceMonitor', 'servicemonitors', 'monitoring.coreos.com'),
  crd('PrometheusRule', 'prometheusrules', 'monitoring.coreos.com'),
];

t.before(async () => {
  cp = await startControlPlane({ auditLog: true });
  const r = await cp.kubectl(['apply', '-f', '-'], {
    input: CRDS.map((d) => YAML.stringify(d)).join('---\n'),
  });
  if (r.code !== 0) throw new Error(r.stderr);
  await waitFor(
    'CRDs served',
    async () => {
      for (const c of CRDS) if ((await cp.kubectl(['get', c.metadata.name, '-A'])).code !== 0) return false;
      return true;
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
  for (const ns of ['metallb-system', 'site-a', 'dg-template'])
    if ((await cp.kubectl(['create', 'namespace', ns])).code !== 0) throw new Error(`namespace ${ns}`);
});
t.teardown(async () => {
  await cp?.stop();
});

/** helm against the test API server (its own cache and config dirs, nothing from the user's). */
const helm = (bin: string, args: string[]) => run(bin, [...args, '--kubeconfig', cp.kubeconfigPath]);

const EVERYTHING = [
  'tls.mode=cert-manager',
  'netfilterCleanup.enabled=true',
  'namespace.create=true',
  'skupper.siteNamespaces={site-a}',
  'monitoring.podMonitor.enabled=true',
  'monitoring.serviceMonitor.enabled=true',
  'monitoring.prometheusRule.enabled=true',
  'monitoring.dashboard.enabled=true',
  'nodeGuard.enabled=true',
];

for (const [label, name] of Object.entries(HELMS)) {
  t.test(
    `${label}: helm template for the lab's version is accepted by the API server's dry run, every part on`,
    async (t) => {
      const r = run(tool(name), [
        'template',
        'drainguard',
        CHART,
        '-n',
        'dg-template',
        '--kube-version',
        APISERVER_VERSION,
        ...EVERYTHING.flatMap((s) => ['--set', s]),
        '--set',
        `netfilterCleanup.namespace=dg-template-nf-${name}`,
      ]);
      t.equal(r.code, 0, r.stderr);
      const docs = parseDocs(r.stdout);
      // Namespaces first (a dry run creates nothing the next objects could live in).
      const namespaces = docs.filter((d) => d.kind === 'Namespace');
      for (const ns of namespaces)
        if (ns.metadata.name !== 'dg-template') await cp.kubectl(['create', 'namespace', ns.metadata.name]);
      const dry = await cp.kubectl(['apply', '--dry-run=server', '-f', '-'], {
        input: docs.map((d) => YAML.stringify(d)).join('---\n'),
      });
      t.equal(dry.code, 0, dry.stderr);
      t.equal(dry.stdout.trim().split('\n').length, docs.length, dry.stdout);
      t.ok(
        docs.some((d) => d.kind === 'ValidatingAdmissionPolicy'),
        'the node guard is among the parts the server accepted',
      );
    },
  );
}

interface AuditEvent {
  verb: string;
  user: { username: string };
  objectRef?: { resource?: string; name?: string; namespace?: string };
  requestReceivedTimestamp: string;
  responseStatus?: { code?: number };
}
const audit = (): AuditEvent[] =>
  readFileSync(cp.auditLogPath as string, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as AuditEvent);

// Everything the chart makes, the custom resources included.
const KINDS = [
  ...CHART_KINDS,
  'issuers.cert-manager.io',
  'certificates.cert-manager.io',
  'podmonitors.monitoring.coreos.com',
  'servicemonitors.monitoring.coreos.com',
  'prometheusrules.monitoring.coreos.com',
];

for (const [label, name] of Object.entries(HELMS)) {
  t.test(`${label}: install, upgrade, uninstall on the lab's API server leaves nothing behind`, async (t) => {
    const bin = tool(name);
    const ns = 'drainguard-system';
    const install = helm(bin, [
      'install',
      'drainguard',
      CHART,
      '-n',
      ns,
      '--create-namespace',
      '--set',
      'skupper.siteNamespaces={site-a}',
      '--set',
      'netfilterCleanup.enabled=true',
      '--set',
      `netfilterCleanup.namespace=nf-${name}`,
      '--set',
      'monitoring.podMonitor.enabled=true,monitoring.prometheusRule.enabled=true',
    ]);
    t.equal(install.code, 0, install.stderr);
    // The chart's kubeVersion range admitted the server's version.
    const manifest = helm(bin, ['get', 'manifest', 'drainguard', '-n', ns]);
    t.equal(manifest.code, 0, manifest.stderr);
    const installed = parseDocs(manifest.stdout);
    t.equal(installed.find((o) => o.kind === 'PodDisruptionBudget')?.apiVersion, 'policy/v1');
    const listed = await cp.kubectl(releaseObjects(KINDS));
    t.equal(listed.code, 0, listed.stderr);
    t.equal(
      listed.stdout.trim().split('\n').length,
      installed.length - 1,
      `every object but the namespace:\n${listed.stdout}`,
    );

    const upgrade = helm(bin, [
      'upgrade',
      'drainguard',
      CHART,
      '-n',
      ns,
      '--reuse-values',
      '--set',
      'image.tag=0.1.1',
      '--set',
      'webhook.replicas=3',
    ]);
    t.equal(upgrade.code, 0, upgrade.stderr);
    const dep = JSON.parse(
      (await cp.kubectl(['get', 'deployment', '-n', ns, 'drainguard-webhook', '-o', 'json'])).stdout,
    ) as { spec: { replicas: number; template: { spec: { containers: { image: string }[] } } } };
    t.equal(dep.spec.replicas, 3);
    t.equal(dep.spec.template.spec.containers[0]?.image, 'ghcr.io/drainguard/drainguard:0.1.1');

    const before = audit().length;
    const uninstall = helm(bin, ['uninstall', 'drainguard', '-n', ns]);
    t.equal(uninstall.code, 0, uninstall.stderr);
    const left = await cp.kubectl(releaseObjects(KINDS));
    t.equal(left.stdout.trim(), '', `left behind:\n${left.stdout}`);
    const mwc = await cp.kubectl(['get', 'mutatingwebhookconfiguration', 'drainguard']);
    t.match(mwc.stderr, /NotFound/, 'no MutatingWebhookConfiguration that would refuse pods');
    const released = await cp.kubectl(['get', 'secrets', '-n', ns, '-l', 'owner=helm', '-o', 'name']);
    t.equal(released.stdout.trim(), '', 'helm deleted its release record');

    // The order helm sent its deletes in.
    const deletes = audit()
      .slice(before)
      .filter((e) => e.verb === 'delete' && e.user.username === 'admin' && e.objectRef?.resource)
      .map((e) => e.objectRef?.resource as string);
    const first = (r: string) => deletes.indexOf(r);
    t.ok(first('mutatingwebhookconfigurations') >= 0, deletes.join(' '));
    if (name === 'helm4') {
      t.ok(
        first('mutatingwebhookconfigurations') < first('deployments'),
        `webhook config before the Deployment: ${deletes.join(' ')}`,
      );
      t.ok(
        first('mutatingwebhookconfigurations') < first('services'),
        `and before the Service: ${deletes.join(' ')}`,
      );
    } else {
      // helm 3.17's uninstall order has no place for it: last, after the Deployment (README: delete it first).
      t.ok(
        first('mutatingwebhookconfigurations') > first('deployments'),
        `helm 3.17 deletes it after the Deployment: ${deletes.join(' ')}`,
      );
    }
  });
}
