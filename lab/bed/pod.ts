// Run a process the way a pod runs it, as far as API access goes: the service-account token and
// CA where every pod has them (/var/run/secrets/kubernetes.io/serviceaccount) and
// KUBERNETES_SERVICE_HOST/PORT, with no kubeconfig. The files go on a tmpfs over /run in the
// process's own mount namespace (needs root), so the host's /run is neither seen nor touched.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ControlPlane } from './control-plane.ts';

const MOUNT_AND_EXEC = [
  'set -e',
  'mount -t tmpfs -o mode=0755,size=1m drainguard-pod /run',
  'mkdir -p /run/secrets/kubernetes.io/serviceaccount',
  'cp "$0/token" "$0/ca.crt" /run/secrets/kubernetes.io/serviceaccount/',
  'exec "$@"',
].join('\n');

export interface PodAccess {
  /** KUBERNETES_SERVICE_HOST and _PORT of the control plane. */
  env: Record<string, string>;
  /** The command line that runs cmd with the service account mounted (the pid is cmd's). */
  wrap(cmd: string[]): string[];
}

/** A service account whose token is `token` (default the lab admin's). */
export function podAccess(cp: ControlPlane, token = cp.target.token ?? ''): PodAccess {
  const dir = mkdtempSync(join(cp.dir, 'serviceaccount-'));
  writeFileSync(join(dir, 'token'), token, { mode: 0o600 });
  writeFileSync(join(dir, 'ca.crt'), cp.target.ca ?? '');
  const server = new URL(cp.server);
  return {
    env: { KUBERNETES_SERVICE_HOST: server.hostname, KUBERNETES_SERVICE_PORT: server.port },
    wrap: (cmd) => [
      'unshare',
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      MOUNT_AND_EXEC,
      dir,
      ...cmd,
    ],
  };
}
