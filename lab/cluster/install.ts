// Installing drainguard on the lab cluster the way a user would: `kubectl apply -k` of an overlay
// of the published manifests/ that only swaps in the locally built image.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { Cluster } from './cluster.ts';

const REPO = join(import.meta.dirname, '..', '..');

/**
 * A user's overlay of manifests/overlays/<base> with the image swapped for the local
 * drainguard:dev (`kustomize edit set image`), plus `patches` lines. Returns its directory.
 */
function writeKustomization(dir: string, base: string): string {
  const overlay = mkdtempSync(join(dir, `overlay-${base}-`));
  writeFileSync(
    join(overlay, 'kustomization.yaml'),
    [
      'apiVersion: kustomize.config.k8s.io/v1beta1',
      'kind: Kustomization',
      'resources:',
      `  - ${relative(overlay, join(REPO, 'manifests', 'overlays', base))}`,
      'images:',
      '  - name: ghcr.io/drainguard/drainguard',
      '    newName: drainguard',
      '    newTag: dev',
      '',
    ].join('\n'),
  );
  return overlay;
}

/** The user's overlay: manifests/overlays/self-managed with drainguard:dev. Returns its directory. */
export function writeOverlay(dir: string): string {
  // Exactly as the README has a user apply it; no sidecar image to set: the webhook injects its own.
  return writeKustomization(dir, 'self-managed');
}

/**
 * The standalone netfilter cleanup as the README has a user apply it: the overlay with the image
 * set, applied, rolled out on every node.
 */
export async function installNetfilterCleanup(c: Cluster): Promise<void> {
  await c.k(['apply', '-k', writeKustomization(c.dir, 'netfilter-cleanup-daemonset')]);
  await c.k([
    'rollout',
    'status',
    '-n',
    'drainguard-netfilter',
    'daemonset/drainguard-netfilter-cleanup',
    '--timeout=180s',
  ]);
}

/**
 * MetalLB's side as a user's cluster has it: its namespace, its CRDs (IPAddressPool,
 * L2Advertisement, ServiceL2Status) and the speaker's service account, and drainguard's grants
 * in that namespace (as the README says).
 */
export async function installMetalLbBase(c: Cluster): Promise<void> {
  await installMetalLbCrds(c);
  await c.k(['create', 'serviceaccount', '-n', 'metallb-system', 'speaker']);
  await c.k(['apply', '-k', join(REPO, 'manifests', 'sidecar-rbac', 'metallb-namespace')]);
}

/** MetalLB's namespace and its CRDs (IPAddressPool, L2Advertisement, ServiceL2Status). */
export async function installMetalLbCrds(c: Cluster): Promise<void> {
  await c.k(['create', 'namespace', 'metallb-system']);
  for (const crd of ['ipaddresspool', 'l2advertisement', 'servicel2status'])
    await c.k(['apply', '-f', join(REPO, 'lab', 'sim', 'speaker', 'crds', `${crd}.yaml`)]);
}

/** `kubectl apply -k` of the user's overlay, then the webhook rolled out and serving. */
export async function installDrainguard(c: Cluster): Promise<void> {
  await c.k(['apply', '-k', writeOverlay(c.dir)]);
  await webhookRolledOut(c);
}

/**
 * Waits for the webhook Deployment's rollout (after an install or a change to it). A rollout that
 * times out says why: its pods and the namespace's latest Events go into the error.
 */
export async function webhookRolledOut(c: Cluster): Promise<void> {
  const ns = 'drainguard-system';
  const r = await c.kubectl([
    'rollout',
    'status',
    '-n',
    ns,
    'deployment/drainguard-webhook',
    '--timeout=180s',
  ]);
  if (r.code === 0) return;
  const pods = await c.kubectl(['get', 'pods', '-n', ns, '-o', 'wide']);
  const events = await c.kubectl(['get', 'events', '-n', ns, '--sort-by=.lastTimestamp']);
  throw new Error(
    `the webhook did not roll out: ${r.stderr.trim()}\npods:\n${pods.stdout}${pods.stderr}\n` +
      `events (latest last):\n${events.stdout.split('\n').slice(-15).join('\n')}${events.stderr}`,
  );
}
