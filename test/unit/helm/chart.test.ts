// The chart with real helm, 4 and 3 (scripts/helm-tools.sh): `helm lint --strict`, the schema
// refusing bad values with a message naming each, and what .Capabilities chooses (the PDB's API
// for a 1.20 API server, the node guard only from 1.30). Offline: no cluster is reached.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { KUBERNETES_COMPAT_VERSION, KUBERNETES_VERSION } from '../../../lab/versions.ts';
import { CHART, CHART_LABELS, HELMS, helmTemplate, ROOT, run, tool } from './render.ts';

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };

t.test('Chart.yaml: version is the product version, appVersion the image tag it installs', async (t) => {
  const chart = YAML.parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as Record<string, string>;
  t.equal(chart.version, pkg.version);
  t.equal(chart.appVersion, pkg.version);
  const dep = helmTemplate(tool('helm4')).find((o) => o.kind === 'Deployment') as unknown as {
    spec: { template: { spec: { containers: { image: string }[] } } };
  };
  t.equal(dep.spec.template.spec.containers[0]?.image, `ghcr.io/drainguard/drainguard:${pkg.version}`);
});

for (const [label, name] of Object.entries(HELMS)) {
  t.test(`${label}: helm lint --strict passes, with every optional part on too`, async (t) => {
    const helm = tool(name);
    for (const extra of [
      [],
      [
        '--set',
        'tls.mode=cert-manager,netfilterCleanup.enabled=true,namespace.create=true,skupper.siteNamespaces={site-a}',
        '--set',
        'monitoring.podMonitor.enabled=true,monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true',
      ],
    ]) {
      const r = run(helm, ['lint', '--strict', CHART, ...extra]);
      t.equal(r.code, 0, `${extra.join(' ')}\n${r.stdout}${r.stderr}`);
      t.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    }
  });

  t.test(`${label}: the schema refuses bad values and names each one`, async (t) => {
    const helm = tool(name);
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ 'webhook.replicas': 0 }, /webhook[./]replicas/],
      [{ 'webhook.replicas': '2' }, /webhook[./]replicas/],
      [{ 'webhook.failurePolicy': 'fail' }, /webhook[./]failurePolicy/],
      [{ 'tls.mode': 'acme' }, /tls[./]mode/],
      [{ 'image.pullPolicy': 'Sometimes' }, /image[./]pullPolicy/],
      [{ 'metallb.namespace': 'MetalLB_System' }, /metallb[./]namespace/],
      [{ 'metallb.speakerServiceAccounts': [] }, /metallb[./]speakerServiceAccounts/],
      [{ 'skupper.siteNamespaces': ['site a'] }, /skupper[./]siteNamespaces/],
      [{ 'netfilterCleanup.port': 70000 }, /netfilterCleanup[./]port/],
      [{ 'netfilterCleanup.metricsPort': 0 }, /netfilterCleanup[./]metricsPort/],
      [{ 'monitoring.podMonitor.interval': 30 }, /monitoring[./]podMonitor[./]interval/],
      [{ 'tls.certManager.duration': '90 days' }, /tls[./]certManager[./]duration/],
      // A misspelt key is refused, not ignored.
      [{ webhok: { replicas: 3 } }, /webhok/],
      [{ 'webhook.replica': 3 }, /replica\b/],
    ];
    for (const [values, names] of cases) {
      const args = ['template', 'x', CHART];
      for (const [k, v] of Object.entries(values)) args.push('--set-json', `${k}=${JSON.stringify(v)}`);
      const r = run(helm, args);
      t.not(r.code, 0, `${JSON.stringify(values)} was accepted`);
      t.match(r.stderr, /values don't meet the specifications of the schema/, JSON.stringify(values));
      t.match(r.stderr, names, `${JSON.stringify(values)}: the message names the value\n${r.stderr}`);
    }
  });

  t.test(
    `${label}: the chart installs on the tested range only, with policy/v1 and the node guard on offer`,
    async (t) => {
      const helm = tool(name);
      t.throws(
        () => helmTemplate(helm, { kubeVersion: '1.32.9' }),
        /chart requires kubeVersion: >=1\.33\.0-0 which is incompatible with Kubernetes v1\.32\.9/,
      );
      for (const kubeVersion of [KUBERNETES_COMPAT_VERSION, KUBERNETES_VERSION]) {
        const objs = helmTemplate(helm, { kubeVersion });
        t.equal(objs.find((o) => o.kind === 'PodDisruptionBudget')?.apiVersion, 'policy/v1', kubeVersion);
        // Off by default.
        t.notOk(
          objs.some((o) => o.kind.startsWith('ValidatingAdmission')),
          kubeVersion,
        );
        const guarded = helmTemplate(helm, { kubeVersion, values: { 'nodeGuard.enabled': true } });
        t.strictSame(
          guarded.filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy')).map((o) => o.kind),
          ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'],
          kubeVersion,
        );
      }
    },
  );
}

t.test(
  'every object carries the chart labels; namespaced objects are in the release namespace',
  async (t) => {
    const objs = helmTemplate(tool('helm4'), {
      namespace: 'dg',
      values: {
        'tls.mode': 'cert-manager',
        'netfilterCleanup.enabled': true,
        'skupper.siteNamespaces': ['site-a'],
        'namespace.create': true,
      },
    });
    for (const o of objs) {
      const labels = o.metadata.labels ?? {};
      for (const l of CHART_LABELS) t.ok(labels[l], `${o.kind}/${o.metadata.name} lacks ${l}`);
    }
    const where = (kind: string, name: string) =>
      objs.find((o) => o.kind === kind && o.metadata.name === name)?.metadata.namespace;
    t.equal(where('Deployment', 'drainguard-webhook'), 'dg');
    t.equal(where('Certificate', 'drainguard-webhook'), 'dg');
    t.equal(where('Role', 'drainguard-sidecar-l2'), 'metallb-system');
    t.equal(where('Role', 'drainguard-sidecar-skupper'), 'site-a');
    t.equal(where('DaemonSet', 'drainguard-netfilter-cleanup'), 'drainguard-netfilter');
    const mwc = objs.find((o) => o.kind === 'MutatingWebhookConfiguration') as unknown as {
      metadata: { annotations: Record<string, string> };
      webhooks: {
        clientConfig: { service: { namespace: string } };
        namespaceSelector: { matchExpressions: { key: string; values: string[] }[] };
      }[];
    };
    t.equal(mwc.webhooks[0]?.clientConfig.service.namespace, 'dg');
    t.equal(mwc.metadata.annotations['cert-manager.io/inject-ca-from'], 'dg/drainguard-webhook-ca');
    // Whatever namespaceSelector a user sets, the webhook never gates kube-system or its own namespace.
    const custom = helmTemplate(tool('helm4'), {
      namespace: 'dg',
      // helm merges maps with the defaults: matchExpressions: [] drops the default opt-in label.
      values: { 'webhook.namespaceSelector': { matchLabels: { team: 'net' }, matchExpressions: [] } },
    }).find((o) => o.kind === 'MutatingWebhookConfiguration') as unknown as typeof mwc;
    t.strictSame(custom.webhooks[0]?.namespaceSelector, {
      matchLabels: { team: 'net' },
      matchExpressions: [
        { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', 'dg'] },
      ],
    });
  },
);

t.test("the lab path: drainguard:dev with imagePullPolicy Never on the lab's API server", async (t) => {
  const objs = helmTemplate(tool('helm4'), {
    kubeVersion: KUBERNETES_VERSION,
    values: { 'image.repository': 'drainguard', 'image.tag': 'dev', 'image.pullPolicy': 'Never' },
  });
  const dep = objs.find((o) => o.kind === 'Deployment') as unknown as {
    spec: { template: { spec: { containers: { image: string; imagePullPolicy: string }[] } } };
  };
  t.strictSame(
    dep.spec.template.spec.containers.map((c) => [c.image, c.imagePullPolicy]),
    [['drainguard:dev', 'Never']],
  );
  t.equal(objs.find((o) => o.kind === 'PodDisruptionBudget')?.apiVersion, 'policy/v1');
});
