// What the README and docs/lab-cluster.md tell a newcomer works as written: the README's values
// table is the schema's (node scripts/sync-readme.ts), and both lab-cluster install paths (helm
// with the README's flags, the documented kustomize overlay) give drainguard:dev, never pulled,
// with the PodDisruptionBudget API a 1.20 API server serves.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { KUBERNETES_VERSION } from '../../../lab/versions.ts';
import { helmValuesTable } from '../../../scripts/helm-values.ts';
import { helmTemplate, names, type Obj, parseDocs, ROOT, run, tool } from './render.ts';

const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
const labDoc = readFileSync(join(ROOT, 'docs', 'lab-cluster.md'), 'utf8');

type Pod = { spec: { template: { spec: { containers: { image: string; imagePullPolicy?: string }[] } } } };
const webhookContainer = (objs: Obj[]) =>
  (objs.find((o) => o.kind === 'Deployment') as unknown as Pod).spec.template.spec.containers[0];

t.test('the README values table is the chart schema (node scripts/sync-readme.ts)', async (t) => {
  const m = /<!-- helm-values:start -->\n([\s\S]*?)\n<!-- helm-values:end -->/.exec(readme);
  t.ok(m, 'README has the helm-values markers');
  if (m) t.equal(m[1], helmValuesTable());
});

t.test(
  "the README's lab helm install: drainguard:dev, pull policy Never, on the lab's Kubernetes",
  async (t) => {
    const lab = readme.slice(readme.indexOf('### First install on the lab cluster'));
    const cmd = /\$helm install drainguard charts\/drainguard ([^\n]*\\\n[^\n]*)/.exec(lab)?.[1] ?? '';
    const sets = [...cmd.matchAll(/--set ([^\s]+)/g)].map((m) => m[1] as string);
    t.strictSame(sets, ['image.repository=drainguard', 'image.tag=dev', 'image.pullPolicy=Never']);
    const values = Object.fromEntries(sets.map((s) => s.split('=') as [string, string]));
    const objs = helmTemplate(tool('helm4'), { values, kubeVersion: KUBERNETES_VERSION });
    t.strictSame(webhookContainer(objs), {
      ...webhookContainer(objs),
      image: 'drainguard:dev',
      imagePullPolicy: 'Never',
    });
    t.equal(objs.find((o) => o.kind === 'PodDisruptionBudget')?.apiVersion, 'policy/v1');
  },
);

t.test(
  "docs/lab-cluster.md's kustomize overlay: the same, and otherwise the self-managed overlay",
  async (t) => {
    const block = /<!-- lab-overlay:start -->\n```sh\n([\s\S]*?)```\n<!-- lab-overlay:end -->/.exec(
      labDoc,
    )?.[1];
    t.ok(block, 'docs/lab-cluster.md has the lab-overlay block');
    if (!block) return;
    // Run as written from the repository's root, into a directory of the test's own; then render.
    const dir = join(mkdtempSync(join(tmpdir(), 'drainguard-lab-doc-')), 'overlay');
    const script = block.replaceAll('/tmp/drainguard-lab', dir).replace(/^kubectl apply -k .*$/m, '');
    t.match(block, /^kubectl apply -k \/tmp\/drainguard-lab$/m);
    execFileSync('bash', ['-euo', 'pipefail', '-c', script], { cwd: ROOT });
    const r = run(tool('kubectl'), ['kustomize', dir]);
    t.equal(r.code, 0, r.stderr);
    const objs = parseDocs(r.stdout);
    t.equal(webhookContainer(objs)?.image, 'drainguard:dev');
    t.equal(webhookContainer(objs)?.imagePullPolicy, 'Never');
    t.equal(objs.find((o) => o.kind === 'PodDisruptionBudget')?.apiVersion, 'policy/v1');
    // The image is renamed by the name the overlays leave it under (README: kustomize edit set image).
    t.match(block, /- name: ghcr\.io\/drainguard\/drainguard\n/);
    t.match(readme, /kustomize edit set image\s+ghcr\.io\/drainguard\/drainguard=<registry>/);
    const overlay = run(tool('kubectl'), ['kustomize', join(ROOT, 'manifests', 'overlays', 'self-managed')]);
    t.strictSame(names(objs), names(parseDocs(overlay.stdout)));
  },
);
