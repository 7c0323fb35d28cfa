import { readFileSync } from 'node:fs';

/** Where and how to reach the API server. Credentials are never logged. */
export interface KubeTarget {
  server: string;
  ca?: string;
  token?: string;
  /** Re-read on every request when set (projected service-account tokens rotate). */
  tokenFile?: string;
  cert?: string;
  key?: string;
  insecureSkipTlsVerify?: boolean;
}

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export function inClusterTarget(env: NodeJS.ProcessEnv = process.env, dir = SA_DIR): KubeTarget | undefined {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  if (!host) return undefined;
  const h = host.includes(':') ? `[${host}]` : host;
  return {
    server: `https://${h}:${port}`,
    ca: readFileSync(`${dir}/ca.crt`, 'utf8'),
    tokenFile: `${dir}/token`,
  };
}

interface KubeconfigDoc {
  'current-context'?: string;
  contexts?: { name: string; context: { cluster: string; user: string } }[];
  clusters?: {
    name: string;
    cluster: {
      server: string;
      'certificate-authority-data'?: string;
      'certificate-authority'?: string;
      'insecure-skip-tls-verify'?: boolean;
    };
  }[];
  users?: {
    name: string;
    user: {
      token?: string;
      tokenFile?: string;
      'client-certificate-data'?: string;
      'client-key-data'?: string;
      'client-certificate'?: string;
      'client-key'?: string;
    };
  }[];
}

const b64 = (s: string) => Buffer.from(s, 'base64').toString('utf8');

async function parseKubeconfigText(text: string, path: string): Promise<KubeconfigDoc> {
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{')) return JSON.parse(text) as KubeconfigDoc;
  // YAML only for people's kubeconfigs; loaded lazily so the sidecar (in-cluster) never pays for it.
  try {
    const yaml = await import('yaml');
    return yaml.parse(text) as KubeconfigDoc;
  } catch (e) {
    throw new Error(`kubeconfig ${path}: not JSON, and YAML could not be parsed: ${(e as Error).message}`);
  }
}

export async function kubeconfigTarget(path: string, context?: string): Promise<KubeTarget> {
  const doc = await parseKubeconfigText(readFileSync(path, 'utf8'), path);
  const ctxName = context ?? doc['current-context'];
  const ctx = doc.contexts?.find((c) => c.name === ctxName) ?? doc.contexts?.[0];
  if (!ctx) throw new Error(`kubeconfig ${path}: no context ${ctxName ?? ''}`);
  const cluster = doc.clusters?.find((c) => c.name === ctx.context.cluster)?.cluster;
  const user = doc.users?.find((u) => u.name === ctx.context.user)?.user ?? {};
  if (!cluster)
    throw new Error(`kubeconfig ${path}: context ${ctx.name} names unknown cluster ${ctx.context.cluster}`);
  const t: KubeTarget = { server: cluster.server };
  if (cluster['certificate-authority-data']) t.ca = b64(cluster['certificate-authority-data']);
  else if (cluster['certificate-authority']) t.ca = readFileSync(cluster['certificate-authority'], 'utf8');
  if (cluster['insecure-skip-tls-verify']) t.insecureSkipTlsVerify = true;
  if (user.token) t.token = user.token;
  if (user.tokenFile) t.tokenFile = user.tokenFile;
  if (user['client-certificate-data']) t.cert = b64(user['client-certificate-data']);
  else if (user['client-certificate']) t.cert = readFileSync(user['client-certificate'], 'utf8');
  if (user['client-key-data']) t.key = b64(user['client-key-data']);
  else if (user['client-key']) t.key = readFileSync(user['client-key'], 'utf8');
  return t;
}

/** --kubeconfig, else $KUBECONFIG, else in-cluster, else ~/.kube/config. */
export async function resolveTarget(
  kubeconfig?: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<KubeTarget> {
  const path = kubeconfig ?? env.KUBECONFIG;
  if (path) return kubeconfigTarget(path);
  const inCluster = inClusterTarget(env);
  if (inCluster) return inCluster;
  const home = env.HOME ?? '/root';
  try {
    return await kubeconfigTarget(`${home}/.kube/config`);
  } catch {
    throw new Error(
      'no cluster access: pass --kubeconfig, set KUBECONFIG, or run in a pod with a service account',
    );
  }
}
