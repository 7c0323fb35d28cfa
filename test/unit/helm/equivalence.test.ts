// The chart must not drift from the kustomize overlays: for equivalent settings both render the
// same objects (kubectl 1.35's kustomize; helm 4 and helm 3), compared after normalising what only
// differs in form (render.ts: the chart's own labels, the imagePullPolicy default, env order).
import { globSync } from 'node:fs';
import t from 'tap';
import {
  HELMS,
  helmTemplate,
  kustomize,
  MANIFESTS,
  names,
  normalise,
  type Obj,
  parseDocs,
  readManifest,
  run,
  tool,
} from './render.ts';

const KUBE = '1.35.0'; // policy/v1 PodDisruptionBudget, as the overlays ship it

interface Case {
  name: string;
  values: Record<string, unknown>;
  kubeVersion?: string;
  /** The same install with kustomize and kubectl, as the README has a user do it. */
  kustomized: () => Obj[];
  /** Only the chart's objects this case is about (default: all). */
  pick?: (o: Obj) => boolean;
}

const skupperSite = (site: string): Obj[] => {
  // The README's per-site commands: apply the Role into the site, bind it, bind the node reader.
  const role = readManifest('sidecar-rbac/skupper-site/role.yaml').map((o) => ({
    ...o,
    metadata: { ...o.metadata, namespace: site },
  }));
  const kubectl = tool('kubectl');
  const created = (args: string[]) => {
    const r = run(kubectl, [...args, '--dry-run=client', '-o', 'yaml']);
    if (r.code !== 0) throw new Error(r.stderr);
    return readYaml(r.stdout);
  };
  return [
    ...role,
    ...created([
      'create',
      'rolebinding',
      'drainguard-sidecar-lease',
      '-n',
      site,
      '--role=drainguard-sidecar-skupper',
      `--serviceaccount=${site}:skupper-router`,
    ]),
    ...created([
      'create',
      'clusterrolebinding',
      `drainguard-sidecar-nodes-${site}`,
      '--clusterrole=drainguard-sidecar-nodes',
      `--serviceaccount=${site}:skupper-router`,
    ]),
  ];
};

const readYaml = parseDocs;
const isNetfilter = (o: Obj) => o.metadata.labels?.['app.kubernetes.io/component'] === 'netfilter-cleanup';
const isSkupper = (o: Obj) =>
  o.metadata.namespace?.startsWith('site-') === true ||
  o.metadata.name.startsWith('drainguard-sidecar-nodes-');

const CASES: Case[] = [
  {
    name: 'self-managed TLS, MetalLB grants (overlays/self-managed + sidecar-rbac/metallb-namespace)',
    values: { 'namespace.create': true },
    kustomized: () => [...kustomize('overlays/self-managed'), ...kustomize('sidecar-rbac/metallb-namespace')],
  },
  {
    name: 'cert-manager TLS, MetalLB grants (overlays/cert-manager + sidecar-rbac/metallb-namespace)',
    values: { 'namespace.create': true, 'tls.mode': 'cert-manager' },
    kustomized: () => [...kustomize('overlays/cert-manager'), ...kustomize('sidecar-rbac/metallb-namespace')],
  },
  {
    name: 'standalone netfilter cleanup (overlays/netfilter-cleanup-daemonset)',
    values: { 'netfilterCleanup.enabled': true },
    kustomized: () => kustomize('overlays/netfilter-cleanup-daemonset'),
    pick: isNetfilter,
  },
  {
    name: 'node guard (components/node-guard)',
    values: { 'nodeGuard.enabled': true },
    kustomized: () => readManifest('components/node-guard/policy.yaml'),
    pick: (o) => o.kind.startsWith('ValidatingAdmissionPolicy'),
  },
  {
    name: "two skupper sites (sidecar-rbac/skupper-site and the README's commands)",
    values: { 'skupper.siteNamespaces': ['site-a', 'site-b'] },
    kustomized: () => [...skupperSite('site-a'), ...skupperSite('site-b')],
    pick: isSkupper,
  },
];

for (const [label, name] of Object.entries(HELMS)) {
  for (const c of CASES) {
    t.test(`${label}: ${c.name}: the chart renders the overlay's objects`, async (t) => {
      const chart = helmTemplate(tool(name), {
        values: c.values,
        kubeVersion: c.kubeVersion ?? KUBE,
      }).filter(c.pick ?? (() => true));
      const kustomized = c.kustomized();
      t.strictSame(names(chart), names(kustomized), 'the same objects');
      const a = normalise(chart);
      const b = normalise(kustomized);
      for (let i = 0; i < Math.min(a.length, b.length); i++)
        t.strictSame(a[i], b[i], `${b[i]?.kind}/${b[i]?.metadata.name}: chart (found) vs kustomize (wanted)`);
    });
  }
}

t.test('the overlays the cases compare are every overlay and component under manifests/', async (t) => {
  const dirs = globSync('{overlays,components}/*', { cwd: MANIFESTS }).sort();
  t.strictSame(dirs, [
    'components/node-guard',
    'overlays/cert-manager',
    'overlays/netfilter-cleanup-daemonset',
    'overlays/self-managed',
  ]);
});
