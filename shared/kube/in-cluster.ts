// The sidecar's lean API access in a pod: the service account's CA and token, nothing else. Kept
// apart from kubeconfig.ts so that the sidecar (one per node) never loads @kubernetes/client-node.
import { readFileSync } from 'node:fs';
import { Agent } from 'node:https';
import type { KubeAuth } from './auth.ts';

/** Where and how to reach the API server with fixed credentials. Credentials are never logged. */
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

/** A KubeTarget as the client's authentication: one keep-alive agent, the token read per request. */
export function targetAuth(target: KubeTarget): KubeAuth {
  const agent = new Agent({
    keepAlive: true,
    maxSockets: 16,
    minVersion: 'TLSv1.2',
    ...(target.ca ? { ca: target.ca } : {}),
    ...(target.cert ? { cert: target.cert } : {}),
    ...(target.key ? { key: target.key } : {}),
    rejectUnauthorized: !target.insecureSkipTlsVerify,
  });
  return {
    server: target.server,
    async apply() {
      const token = target.tokenFile ? readFileSync(target.tokenFile, 'utf8').trim() : target.token;
      const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
      return { agent, headers };
    },
    close: () => agent.destroy(),
  };
}
