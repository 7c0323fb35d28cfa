// The chart's alerts (charts/drainguard/files/alerts.yaml) with Debian's promtool: the file passes
// `promtool check rules` (expressions and annotation templates), and `promtool test rules` shows each
// alert firing on its series and silent on a healthy one. promtool compares annotations exactly, so
// the tests run on a copy without them; a separate check keeps every $labels.x an annotation names
// among the labels the alert keeps. The PrometheusRule the chart renders carries the file's groups.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { CHART, helmTemplate, run, tool } from './render.ts';

const RULES = join(CHART, 'files', 'alerts.yaml');

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
const groups = (YAML.parse(readFileSync(RULES, 'utf8')) as { groups: { name: string; rules: Rule[] }[] })
  .groups;
const rules = groups.flatMap((g) => g.rules);

/** One promtool case: series over time (promtool's 'a+bxN' notation, 1 m apart) and the alert at eval. */
interface Case {
  series: Record<string, string>;
  at: string;
  /** The alert's labels when it fires (severity added from the rule); absent: it must not fire. */
  fires?: Record<string, string>;
}

// Scrape labels the PodMonitor leaves on a sidecar's series (instance and job are aggregated away).
const SPEAKER =
  'namespace="metallb-system",pod="speaker-a",node="node-a",instance="198.18.0.5:7490",job="drainguard"';
const SPEAKER_LABELS = { namespace: 'metallb-system', pod: 'speaker-a', node: 'node-a' };
const WEBHOOK =
  'namespace="drainguard-system",pod="drainguard-webhook-1",instance="198.18.1.4:8443",job="drainguard"';
const buckets = (le: Record<string, string>) =>
  Object.fromEntries(
    Object.entries(le).map(([l, v]) => [
      `drainguard_webhook_request_duration_seconds_bucket{${WEBHOOK},le="${l}"}`,
      v,
    ]),
  );

const CASES: Record<string, { fire: Case[]; healthy: Case[] }> = {
  DrainguardL2HandoverRefused: {
    fire: [
      {
        series: { [`drainguard_l2_handover_impossible{${SPEAKER}}`]: '0 1x10' },
        at: '5m',
        fires: SPEAKER_LABELS,
      },
    ],
    healthy: [{ series: { [`drainguard_l2_handover_impossible{${SPEAKER}}`]: '0x10' }, at: '5m' }],
  },
  DrainguardL2HandoverUnconfirmed: {
    fire: [
      {
        series: { [`drainguard_l2_phase{${SPEAKER},phase="awaiting-confirmation"}`]: '1x10' },
        at: '5m',
        fires: SPEAKER_LABELS,
      },
    ],
    // Confirmed within a minute: the phase moved on.
    healthy: [
      {
        series: {
          [`drainguard_l2_phase{${SPEAKER},phase="awaiting-confirmation"}`]: '1 0x9',
          [`drainguard_l2_phase{${SPEAKER},phase="fenced"}`]: '0 1x9',
        },
        at: '5m',
      },
    ],
  },
  DrainguardL2FailsafeEngaged: {
    fire: [
      {
        series: { [`drainguard_l2_phase{${SPEAKER},phase="failsafe-fenced"}`]: '0 1x5' },
        at: '2m',
        fires: SPEAKER_LABELS,
      },
    ],
    healthy: [
      {
        series: {
          [`drainguard_l2_phase{${SPEAKER},phase="failsafe-fenced"}`]: '0x5',
          [`drainguard_l2_phase{${SPEAKER},phase="fenced"}`]: '1x5',
        },
        at: '2m',
      },
    ],
  },
  DrainguardL2FenceOnUncordonedNode: {
    fire: [
      {
        series: {
          [`drainguard_l2_phase{${SPEAKER},phase="fenced"}`]: '1x20',
          'kube_node_spec_unschedulable{node="node-a",job="kube-state-metrics"}': '0x20',
        },
        at: '15m',
        fires: SPEAKER_LABELS,
      },
    ],
    // Fenced while the node is still cordoned: the drain is going on.
    healthy: [
      {
        series: {
          [`drainguard_l2_phase{${SPEAKER},phase="fenced"}`]: '1x20',
          'kube_node_spec_unschedulable{node="node-a",job="kube-state-metrics"}': '1x20',
          'kube_node_spec_unschedulable{node="node-b",job="kube-state-metrics"}': '0x20',
        },
        at: '15m',
      },
    ],
  },
  DrainguardL2ActionsFailing: {
    fire: [
      {
        series: { [`drainguard_l2_actions_total{${SPEAKER},action="fence",outcome="error"}`]: '0 1 2 2 2' },
        at: '3m',
        fires: { ...SPEAKER_LABELS, action: 'fence' },
      },
    ],
    healthy: [
      {
        series: { [`drainguard_l2_actions_total{${SPEAKER},action="fence",outcome="ok"}`]: '0 1 2 3 4' },
        at: '3m',
      },
    ],
  },
  DrainguardSidecarForbidden: {
    fire: [
      {
        series: { [`drainguard_api_errors_total{${SPEAKER},code="403"}`]: '0 0 3 5' },
        at: '3m',
        fires: SPEAKER_LABELS,
      },
    ],
    // 409s are answers the sidecar handles (a conflict), not a missing grant.
    healthy: [{ series: { [`drainguard_api_errors_total{${SPEAKER},code="409"}`]: '0 2 4 6' }, at: '3m' }],
  },
  DrainguardSidecarApiViewUnsynced: {
    fire: [
      { series: { [`drainguard_api_view_synced{${SPEAKER}}`]: '0x10' }, at: '6m', fires: SPEAKER_LABELS },
    ],
    healthy: [{ series: { [`drainguard_api_view_synced{${SPEAKER}}`]: '0 0 1x8' }, at: '6m' }],
  },
  DrainguardNetfilterCleanupDegraded: {
    fire: [
      {
        series: { [`drainguard_netfilter_ebtables_usable{${SPEAKER}}`]: '0x10' },
        at: '6m',
        fires: SPEAKER_LABELS,
      },
      {
        series: {
          [`drainguard_netfilter_ebtables_usable{${SPEAKER}}`]: '1x10',
          [`drainguard_netfilter_passes_total{${SPEAKER},result="error"}`]: '0+1x10',
        },
        at: '6m',
        fires: SPEAKER_LABELS,
      },
    ],
    healthy: [
      {
        series: {
          [`drainguard_netfilter_ebtables_usable{${SPEAKER}}`]: '1x10',
          [`drainguard_netfilter_passes_total{${SPEAKER},result="ok"}`]: '0+1x10',
          [`drainguard_netfilter_passes_total{${SPEAKER},result="held"}`]: '0+1x10',
        },
        at: '6m',
      },
    ],
  },
  DrainguardLeaseHandoverFailed: {
    fire: [
      {
        series: {
          [`drainguard_lease_handovers_total{namespace="site-a",pod="router-1",lease="site-a/skupper-site-leader",outcome="api-failed",instance="i",job="j"}`]:
            '0 1 1 1',
        },
        at: '2m',
        fires: {
          namespace: 'site-a',
          pod: 'router-1',
          lease: 'site-a/skupper-site-leader',
          outcome: 'api-failed',
        },
      },
    ],
    healthy: [
      {
        series: {
          [`drainguard_lease_handovers_total{namespace="site-a",pod="router-1",lease="site-a/skupper-site-leader",outcome="handed-over",instance="i",job="j"}`]:
            '0 1 1 1',
        },
        at: '2m',
      },
    ],
  },
  DrainguardWebhookDenials: {
    fire: [
      {
        series: {
          [`drainguard_webhook_requests_total{${WEBHOOK},outcome="denied",profile="metallb-speaker"}`]:
            '0 2 4',
        },
        at: '2m',
        fires: { namespace: 'drainguard-system', profile: 'metallb-speaker' },
      },
    ],
    healthy: [
      {
        series: {
          [`drainguard_webhook_requests_total{${WEBHOOK},outcome="patched",profile="metallb-speaker"}`]:
            '0+50x4',
          [`drainguard_webhook_requests_total{${WEBHOOK},outcome="allowed",profile="none"}`]: '0+50x4',
        },
        at: '2m',
      },
    ],
  },
  DrainguardWebhookSlow: {
    // Every review between 250 ms and 1 s: p99 near 1 s.
    fire: [
      {
        series: buckets({ '0.1': '0x20', '0.25': '0x20', '1': '0+60x20', '+Inf': '0+60x20' }),
        at: '15m',
        fires: { namespace: 'drainguard-system' },
      },
    ],
    healthy: [
      {
        series: buckets({ '0.1': '0+60x20', '0.25': '0+60x20', '1': '0+60x20', '+Inf': '0+60x20' }),
        at: '15m',
      },
    ],
  },
  DrainguardWebhookCertReloadRejected: {
    fire: [
      {
        series: { [`drainguard_webhook_cert_reloads_total{${WEBHOOK},result="rejected"}`]: '0 1 1' },
        at: '2m',
        fires: { namespace: 'drainguard-system', pod: 'drainguard-webhook-1' },
      },
    ],
    healthy: [
      {
        series: { [`drainguard_webhook_cert_reloads_total{${WEBHOOK},result="applied"}`]: '0 1 1' },
        at: '2m',
      },
    ],
  },
  DrainguardWebhookCertificateExpiring: {
    // promtool's clock starts at the epoch: a certificate expiring one day after it.
    fire: [
      {
        series: {
          [`drainguard_webhook_certificate_expiration_timestamp_seconds{${WEBHOOK},source="self-managed"}`]:
            '86400x200',
        },
        at: '2h',
        fires: { namespace: 'drainguard-system', pod: 'drainguard-webhook-1', source: 'self-managed' },
      },
      {
        // One replica still serves the old pair (cert-manager renewed it; the reload failed).
        series: {
          [`drainguard_webhook_certificate_expiration_timestamp_seconds{${WEBHOOK},source="cert-dir"}`]:
            '86400x200',
          'drainguard_webhook_certificate_expiration_timestamp_seconds{namespace="drainguard-system",pod="drainguard-webhook-2",instance="198.18.1.5:8443",job="drainguard",source="cert-dir"}':
            '7776000x200',
        },
        at: '2h',
        fires: { namespace: 'drainguard-system', pod: 'drainguard-webhook-1', source: 'cert-dir' },
      },
    ],
    healthy: [
      {
        series: {
          [`drainguard_webhook_certificate_expiration_timestamp_seconds{${WEBHOOK},source="self-managed"}`]:
            '2592000x200',
          // Another certificate near expiry is not drainguard's.
          'certmanager_certificate_expiration_timestamp_seconds{namespace="other",name="other",job="cert-manager"}':
            '86400x200',
        },
        at: '2h',
      },
    ],
  },
};

t.test('promtool check rules: expressions and annotation templates parse', async (t) => {
  const r = run(tool('promtool'), ['check', 'rules', RULES]);
  t.equal(r.code, 0, r.stdout + r.stderr);
  t.match(r.stdout, new RegExp(`SUCCESS: ${rules.length} rules found`));
});

t.test('every alert has a firing case and a healthy case', async (t) => {
  t.strictSame(Object.keys(CASES).sort(), rules.map((r) => r.alert).sort());
  for (const [name, c] of Object.entries(CASES)) {
    t.ok(c.fire.length > 0 && c.fire.every((f) => f.fires), `${name}: fires`);
    t.ok(c.healthy.length > 0 && c.healthy.every((h) => !h.fires), `${name}: stays silent`);
  }
});

t.test('promtool test rules: each alert fires on its series and stays silent on a healthy one', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'drainguard-alerts-'));
  const stripped = {
    groups: groups.map((g) => ({
      name: g.name,
      rules: g.rules.map(({ annotations: _a, ...rest }) => rest),
    })),
  };
  writeFileSync(join(dir, 'alerts.yaml'), YAML.stringify(stripped));
  const severity = (name: string) => rules.find((r) => r.alert === name)?.labels?.severity ?? '';
  const tests = Object.entries(CASES).flatMap(([alertname, c]) =>
    [...c.fire, ...c.healthy].map((k) => ({
      interval: '1m',
      input_series: Object.entries(k.series).map(([series, values]) => ({ series, values })),
      alert_rule_test: [
        {
          eval_time: k.at,
          alertname,
          exp_alerts: k.fires ? [{ exp_labels: { ...k.fires, severity: severity(alertname) } }] : [],
        },
      ],
    })),
  );
  writeFileSync(
    join(dir, 'tests.yaml'),
    YAML.stringify({ rule_files: ['alerts.yaml'], evaluation_interval: '1m', tests }),
  );
  const r = run(tool('promtool'), ['test', 'rules', join(dir, 'tests.yaml')]);
  t.equal(r.code, 0, r.stdout + r.stderr);
  t.match(r.stdout, /SUCCESS/);
});

t.test("annotations name only labels the alert keeps (its by-clauses and the rule's labels)", async (t) => {
  for (const r of rules) {
    const kept = new Set(['severity', ...Object.keys(r.labels ?? {})]);
    for (const m of r.expr.matchAll(/by \(([^)]*)\)/g))
      for (const l of (m[1] as string).split(',')) kept.add(l.trim());
    for (const text of Object.values(r.annotations ?? {}))
      for (const m of text.matchAll(/\$labels\.([a-z_]+)/g))
        t.ok(kept.has(m[1] as string), `${r.alert}: annotation names $labels.${m[1]}, which the alert drops`);
  }
});

t.test('the PrometheusRule the chart renders is the rule file', async (t) => {
  const objs = helmTemplate(tool('helm4'), {
    values: {
      'monitoring.prometheusRule.enabled': true,
      'monitoring.prometheusRule.labels': { release: 'kps' },
    },
  });
  const rule = objs.find((o) => o.kind === 'PrometheusRule') as unknown as {
    apiVersion: string;
    metadata: { labels: Record<string, string> };
    spec: unknown;
  };
  t.equal(rule.apiVersion, 'monitoring.coreos.com/v1');
  t.equal(rule.metadata.labels.release, 'kps');
  t.strictSame(rule.spec, { groups });
  t.notOk(
    helmTemplate(tool('helm4')).some((o) => o.kind === 'PrometheusRule'),
    'off by default',
  );
});
