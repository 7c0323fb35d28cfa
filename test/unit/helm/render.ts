// The chart's test tools: helm 4 and helm 3 and kubectl 1.35 (its kustomize) from the cache
// scripts/helm-tools.sh fills (bootstrap runs it; a test calls it too, so a lone `npx tap` works),
// and the objects each renders, parsed.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';

export const ROOT = join(import.meta.dirname, '..', '..', '..');
export const CHART = join(ROOT, 'charts', 'drainguard');
export const MANIFESTS = join(ROOT, 'manifests');

export type Obj = Record<string, unknown> & {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> } & Record<string, unknown>;
};

/** Path of a tool from scripts/helm-tools.sh (installed into the cache when missing). */
export function tool(name: 'helm4' | 'helm3' | 'kubectl' | 'promtool' | 'prometheus'): string {
  return execFileSync('bash', [join(ROOT, 'scripts', 'helm-tools.sh'), name], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
}

export const HELMS = { 'helm 4.1.4': 'helm4', 'helm 3.17.2': 'helm3' } as const;

export function parseDocs(text: string): Obj[] {
  return YAML.parseAllDocuments(text)
    .map((d) => d.toJSON() as Obj | null)
    .filter((d): d is Obj => d !== null && typeof d === 'object');
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** helm's own directories, apart from the user's (no repositories, plugins or registry logins). */
const HELM_HOMES = Object.fromEntries(
  ['CACHE', 'CONFIG', 'DATA'].map((k) => [
    `HELM_${k}_HOME`,
    join(tmpdir(), `drainguard-helm-${k.toLowerCase()}`),
  ]),
);

export function run(bin: string, args: string[]): RunResult {
  // No cluster unless --kubeconfig names one: an empty KUBECONFIG, so nothing reaches one by accident.
  const r = spawnSync(bin, args, {
    encoding: 'utf8',
    env: { ...process.env, KUBECONFIG: '/dev/null', ...HELM_HOMES },
    maxBuffer: 64 << 20,
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** `helm template` of the chart into `namespace` with --set-json values; throws with helm's message. */
export function helmTemplate(
  helm: string,
  opts: { values?: Record<string, unknown>; kubeVersion?: string; namespace?: string } = {},
): Obj[] {
  const args = ['template', 'drainguard', CHART, '--namespace', opts.namespace ?? 'drainguard-system'];
  if (opts.kubeVersion) args.push('--kube-version', opts.kubeVersion);
  for (const [k, v] of Object.entries(opts.values ?? {}))
    args.push('--set-json', `${k}=${JSON.stringify(v)}`);
  const r = run(helm, args);
  if (r.code !== 0) throw new Error(r.stderr.trim());
  return parseDocs(r.stdout);
}

/** `kubectl kustomize` of a directory under manifests/. */
export function kustomize(dir: string): Obj[] {
  const r = run(tool('kubectl'), ['kustomize', join(MANIFESTS, dir)]);
  if (r.code !== 0) throw new Error(`kubectl kustomize ${dir}: ${r.stderr}`);
  return parseDocs(r.stdout);
}

export function readManifest(file: string): Obj[] {
  return parseDocs(readFileSync(join(MANIFESTS, file), 'utf8'));
}

/** Labels the chart puts on every object's metadata that the kustomize overlays do not compare on. */
export const CHART_LABELS = [
  'app.kubernetes.io/part-of',
  'app.kubernetes.io/managed-by',
  'app.kubernetes.io/instance',
  'app.kubernetes.io/version',
  'helm.sh/chart',
];

const sortKey = (o: Obj) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;

/**
 * Objects as compared: the chart's own labels dropped (on both sides), an empty labels map
 * dropped, the API server's imagePullPolicy default filled in (IfNotPresent for a tagged image),
 * env lists in name order (a kustomize patch appends where the chart writes in place); sorted.
 */
export function normalise(objs: Obj[]): Obj[] {
  const out = structuredClone(objs).map((o) => {
    const labels = o.metadata.labels;
    if (labels) {
      for (const k of CHART_LABELS) delete labels[k];
      if (Object.keys(labels).length === 0) delete o.metadata.labels;
    }
    const pod = (o.spec as { template?: { spec?: { containers?: Record<string, unknown>[] } } } | undefined)
      ?.template?.spec;
    for (const c of pod?.containers ?? []) {
      if (c.imagePullPolicy === undefined) c.imagePullPolicy = 'IfNotPresent';
      if (Array.isArray(c.env)) (c.env as { name: string }[]).sort((a, b) => a.name.localeCompare(b.name));
    }
    return o;
  });
  return out.sort((a, b) => sortKey(a).localeCompare(sortKey(b)));
}

export const names = (objs: Obj[]) => objs.map(sortKey).sort();

/** Every kind the chart makes, namespaced and cluster-scoped (`kubectl get` form). */
export const CHART_KINDS = [
  'mutatingwebhookconfigurations',
  'priorityclasses',
  'clusterroles',
  'clusterrolebindings',
  'deployments',
  'daemonsets',
  'services',
  'serviceaccounts',
  'secrets',
  'roles',
  'rolebindings',
  'poddisruptionbudgets',
  'networkpolicies',
  'configmaps',
];

/** kubectl arguments listing what a release named drainguard has in a cluster (helm's instance label). */
export const releaseObjects = (kinds: string[] = CHART_KINDS) => [
  'get',
  kinds.join(','),
  '-A',
  '-l',
  'app.kubernetes.io/instance=drainguard',
  '-o',
  'name',
];
