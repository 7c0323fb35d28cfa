// The upstream programs the lab runs, at lab/versions.env's versions, where
// scripts/build-upstream.sh caches them after building them from the Go module proxy.
// LAB_KUBERNETES_VERSION picks another Kubernetes build (`make test-compat` runs the range's floor).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const ENV_FILE = join(import.meta.dirname, 'versions.env');

/** lab/versions.env as a map: KEY=value lines; comments and blank lines skipped. */
export function readVersions(text = readFileSync(ENV_FILE, 'utf8')): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Z_]+)=([0-9A-Za-z.+-]+)\s*$/.exec(line.trim());
    if (m) out[m[1] as string] = m[2] as string;
  }
  return out;
}

const versions = readVersions();
const need = (key: string): string => {
  const v = versions[key];
  if (!v) throw new Error(`${ENV_FILE}: no ${key}=<version> line`);
  return v;
};

/** The Kubernetes version the lab runs (no leading v), e.g. 1.37.2. */
export const KUBERNETES_VERSION = process.env.LAB_KUBERNETES_VERSION || need('KUBERNETES_VERSION');
export const KUBERNETES_COMPAT_VERSION = need('KUBERNETES_COMPAT_VERSION');
export const ETCD_VERSION = need('ETCD_VERSION');
export const CONTAINERD_VERSION = need('CONTAINERD_VERSION');
/** MetalLB's release (no leading v); LAB_METALLB_VERSION picks another build (a version lane). */
export const METALLB_VERSION = process.env.LAB_METALLB_VERSION || need('METALLB_VERSION');

export const cacheDir = () =>
  join(process.env.XDG_CACHE_HOME ?? join(process.env.HOME ?? '/root', '.cache'), 'drainguard');

/** kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl, pause.c. */
export const kubernetesBinDir = () => join(cacheDir(), `kubernetes-${KUBERNETES_VERSION}`);
export const kubectlBinary = () => join(kubernetesBinDir(), 'kubectl');
export const etcdBinary = () => join(cacheDir(), `etcd-${ETCD_VERSION}`, 'etcd');
/** containerd, containerd-shim-runc-v2 (containerd finds it on its PATH) and ctr. */
export const containerdBinDir = () => join(cacheDir(), `containerd-${CONTAINERD_VERSION}`);

/** The environment for a containerd: its shim is looked up on PATH, so its directory goes first. */
export const containerdEnv = (): NodeJS.ProcessEnv => ({
  ...process.env,
  PATH: `${containerdBinDir()}:${process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'}`,
});
/** MetalLB's speaker and controller, and its metallb-native.yaml, as built from the module. */
export const metallbBinDir = () => join(cacheDir(), `metallb-${METALLB_VERSION}`);
