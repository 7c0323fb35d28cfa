// The Grafana dashboard and the alerts query only what the product exports: every drainguard_*
// name in a query is a metric the sidecar or the webhook registers (read from their sources;
// a histogram's _bucket/_sum/_count series included), and every panel's query names one.
import { globSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { baseOptions } from '../../../lab/fake/webhook.ts';
import { plan } from '../../../webhook/plan/index.ts';
import { applyPatch } from '../../../webhook/plan/json-patch.ts';
import { SIDECAR_PORT_NAME } from '../../../webhook/plan/sidecar.ts';
import { skupperPod, speakerPod } from '../webhook/fixtures.ts';
import { CHART, helmTemplate, ROOT, tool } from './render.ts';

// biome-ignore lint/suspicious/noExplicitAny: the checks walk arbitrary pod JSON
type Obj = Record<string, any>;

/** Metric names registered in the product's sources (a quoted 'drainguard_…' is a registration). */
function exported(): Set<string> {
  const names = new Set<string>();
  for (const f of globSync('{sidecar,webhook,shared}/**/*.ts', { cwd: ROOT }))
    for (const m of readFileSync(join(ROOT, f), 'utf8').matchAll(/'(drainguard_[a-z0-9_]+)'/g))
      names.add(m[1] as string);
  return names;
}

const EXPORTED = exported();
const known = (name: string) => EXPORTED.has(name) || EXPORTED.has(name.replace(/_(bucket|sum|count)$/, ''));
const metricsIn = (expr: string) => [...expr.matchAll(/\bdrainguard_[a-z0-9_]+/g)].map((m) => m[0]);

type Panel = { title: string; type: string; targets?: { expr: string }[]; panels?: Panel[] };
const dashboard = JSON.parse(readFileSync(join(CHART, 'files', 'dashboard.json'), 'utf8')) as {
  uid: string;
  panels: Panel[];
  templating: { list: { name: string; query: unknown }[] };
};

t.test('the product registers the metrics the docs list', async (t) => {
  // A sanity floor: the scan found the sidecar's and the webhook's registrations.
  for (const m of [
    'drainguard_l2_phase',
    'drainguard_lease_handover_seconds',
    'drainguard_webhook_requests_total',
  ])
    t.ok(EXPORTED.has(m), m);
});

t.test('every dashboard query names a metric the product exports, and only such', async (t) => {
  const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
  t.ok(panels.length >= 8, 'panels');
  for (const p of panels) {
    if (p.type === 'row') continue;
    t.ok(p.targets && p.targets.length > 0, `${p.title}: has a query`);
    for (const { expr } of p.targets ?? []) {
      const used = metricsIn(expr);
      t.ok(used.length > 0, `${p.title}: ${expr} names no drainguard metric`);
      for (const m of used) t.ok(known(m), `${p.title}: ${m} is not exported by the product`);
    }
  }
  for (const v of dashboard.templating.list)
    if (typeof v.query === 'string')
      for (const m of metricsIn(v.query)) t.ok(known(m), `variable ${v.name}: ${m} is not exported`);
  // What the issue asks to see: handover durations, VIP owners, fence state, cleanup, webhook.
  const all = panels.flatMap((p) => (p.targets ?? []).map((x) => x.expr)).join('\n');
  for (const m of [
    'drainguard_l2_handover_seconds',
    'drainguard_lease_handover_seconds_bucket',
    'drainguard_l2_phase',
    'drainguard_lease_holder',
    'drainguard_netfilter_removed_total',
    'drainguard_webhook_requests_total',
    'drainguard_webhook_request_duration_seconds_bucket',
  ])
    t.match(all, m, `the dashboard shows ${m}`);
});

t.test('every drainguard metric an alert queries is exported', async (t) => {
  const rules = (
    YAML.parse(readFileSync(join(CHART, 'files', 'alerts.yaml'), 'utf8')) as {
      groups: { rules: { alert: string; expr: string }[] }[];
    }
  ).groups.flatMap((g) => g.rules);
  for (const r of rules) {
    const used = metricsIn(r.expr);
    for (const m of used) t.ok(known(m), `${r.alert}: ${m} is not exported by the product`);
  }
  // A typo'd name is caught (the check itself works).
  t.notOk(known('drainguard_l2_phases'));
});

t.test('the chart ships the dashboard in a ConfigMap for Grafana’s sidecar when asked', async (t) => {
  const objs = helmTemplate(tool('helm4'), { values: { 'monitoring.dashboard.enabled': true } });
  const cm = objs.find((o) => o.kind === 'ConfigMap') as unknown as {
    metadata: { labels: Record<string, string> };
    data: Record<string, string>;
  };
  t.equal(cm.metadata.labels.grafana_dashboard, '1');
  t.strictSame(JSON.parse(cm.data['drainguard.json'] as string), dashboard);
});

t.test('PodMonitor: the webhook over HTTPS with its CA, the sidecars by their drainguard port', async (t) => {
  const objs = helmTemplate(tool('helm4'), {
    namespace: 'dg',
    values: { 'monitoring.podMonitor.enabled': true, 'monitoring.serviceMonitor.enabled': true },
  });
  type Endpoint = {
    port: string;
    scheme?: string;
    tlsConfig?: { serverName: string; ca: { secret: { name: string; key: string } } };
  };
  const pm = (name: string) =>
    objs.find((o) => o.kind === 'PodMonitor' && o.metadata.name === name) as unknown as {
      spec: { namespaceSelector?: { any: boolean }; podMetricsEndpoints: Endpoint[] };
    };
  const hook = pm('drainguard-webhook').spec.podMetricsEndpoints[0];
  t.equal(hook?.scheme, 'https');
  t.equal(hook?.tlsConfig?.serverName, 'drainguard-webhook.dg.svc');
  t.strictSame(hook?.tlsConfig?.ca.secret, { name: 'drainguard-webhook-tls', key: 'ca.crt' });
  const sidecars = pm('drainguard-sidecars').spec;
  t.equal(sidecars.namespaceSelector?.any, true);
  t.equal(sidecars.podMetricsEndpoints[0]?.port, SIDECAR_PORT_NAME);
  t.ok(objs.some((o) => o.kind === 'ServiceMonitor'));
});

/** The injected sidecar's declared ports and env, as the planner patches `pod` in. */
function injected(pod: Obj, namespace: string): { ports: Obj[]; env: Record<string, string> } {
  const p = plan(
    { operation: 'CREATE', kind: { group: '', version: 'v1', kind: 'Pod' }, namespace, object: pod },
    baseOptions(),
  );
  if (!p.allowed) throw new Error(p.message);
  const { spec } = applyPatch(pod, p.patch) as { spec: { initContainers: Obj[] } };
  const sc = spec.initContainers.find((c) => c.name === 'drainguard') as Obj;
  return {
    ports: sc.ports,
    env: Object.fromEntries(
      (sc.env as Obj[]).map((e) => [e.name, e.value ?? e.valueFrom.fieldRef.fieldPath]),
    ),
  };
}

t.test(
  'the PodMonitor reaches every sidecar: the injected ones and the netfilter DaemonSet declare the port it scrapes',
  async (t) => {
    // Off the host network: the one listener, on the pod's IP.
    const skupper = injected(skupperPod(), 'site');
    t.strictSame(skupper.ports, [{ name: SIDECAR_PORT_NAME, containerPort: 7481, protocol: 'TCP' }]);
    // hostNetwork (MetalLB's speaker): /metrics alone on the node's IP, the rest on loopback.
    const speaker = injected(speakerPod(), 'metallb-system');
    t.strictSame(speaker.ports, [
      { name: SIDECAR_PORT_NAME, containerPort: 7490, hostPort: 7490, protocol: 'TCP' },
    ]);
    t.equal(speaker.env.DRAINGUARD_BIND_ADDRESS, '127.0.0.1');
    t.equal(speaker.env.DRAINGUARD_METRICS_PORT, '7490');
    t.equal(speaker.env.DRAINGUARD_METRICS_ADDRESS, 'status.hostIP');
    // The chart's standalone netfilter DaemonSet (hostNetwork) likewise.
    const ds = helmTemplate(tool('helm4'), { values: { 'netfilterCleanup.enabled': true } }).find(
      (o) => o.kind === 'DaemonSet',
    ) as unknown as { spec: { template: { spec: { hostNetwork: boolean; containers: Obj[] } } } };
    const [nf] = ds.spec.template.spec.containers as [Obj];
    t.equal(ds.spec.template.spec.hostNetwork, true);
    t.strictSame(nf.ports, [
      { name: SIDECAR_PORT_NAME, containerPort: 7493, hostPort: 7493, protocol: 'TCP' },
    ]);
    const env = Object.fromEntries(
      (nf.env as Obj[]).map((e) => [e.name, e.value ?? e.valueFrom.fieldRef.fieldPath]),
    );
    t.strictSame(
      [
        env.DRAINGUARD_BIND_ADDRESS,
        env.DRAINGUARD_PORT,
        env.DRAINGUARD_METRICS_PORT,
        env.DRAINGUARD_METRICS_ADDRESS,
      ],
      ['127.0.0.1', '7483', '7493', 'status.hostIP'],
    );
    t.equal(nf.readinessProbe.httpGet.host, '127.0.0.1', 'probes stay on loopback');
    t.throws(
      () =>
        helmTemplate(tool('helm4'), {
          values: { 'netfilterCleanup.enabled': true, 'netfilterCleanup.metricsPort': 7483 },
        }),
      /netfilterCleanup\.metricsPort \(7483\) must differ from netfilterCleanup\.port/,
    );
  },
);
