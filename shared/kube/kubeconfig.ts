// API access from a kubeconfig, for everything that runs outside a pod or is pointed at a cluster:
// the CLI commands, the webhook with --kubeconfig, the sidecar outside a pod (tests, development).
// @kubernetes/client-node's KubeConfig reads the files and authenticates (exec credential plugins,
// client certificates, tokens, auth providers, proxy-url, tls-server-name); this module adds what
// kubectl does and client-node does not: KUBECONFIG's files merged first-wins, tokenFile and exec
// commands relative to their file, KUBERNETES_EXEC_INFO, and errors that name the field.
// Without any kubeconfig, a pod's service account through in-cluster.ts, as kubectl falls back to it.
// Loaded lazily (dynamic import) by its users: the sidecar in a pod never loads client-node.
import { existsSync, readFileSync } from 'node:fs';
import type https from 'node:https';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join, sep } from 'node:path';
import { type Cluster, type Context, KubeConfig, loadYaml, type User } from '@kubernetes/client-node';
import type { KubeAuth } from './auth.ts';
import { inClusterTarget, type KubeTarget, targetAuth } from './in-cluster.ts';

export interface KubeconfigSource {
  /** --kubeconfig: exactly this file. */
  kubeconfig?: string | undefined;
  /** --context: instead of the current-context. */
  context?: string | undefined;
  env?: NodeJS.ProcessEnv;
}

export const EXEC_API_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'];

interface RawDoc {
  users?: { name?: string; user?: { tokenFile?: string } }[];
}

export interface Loaded {
  kc: KubeConfig;
  origin: string;
  /** users[].tokenFile (absolute): client-node does not read this field. */
  tokenFiles: Map<string, string>;
}

const names = (xs: { name: string }[]) => xs.map((x) => x.name).join(', ') || '(none)';

export interface KubeconfigFiles {
  files: string[];
  /** Where the list came from, for errors: `--kubeconfig /x`, `KUBECONFIG=/a:/b`, `~/.kube/config`. */
  origin: string;
}

// A uid without a passwd entry and no $HOME (a pod's runAsUser) makes os.homedir() throw.
const homeOf = () => {
  try {
    return homedir();
  } catch {
    return '/';
  }
};

/** The files to read, kubectl's way: --kubeconfig, else $KUBECONFIG's list, else ~/.kube/config. */
export function kubeconfigFiles(src: KubeconfigSource, env: NodeJS.ProcessEnv): KubeconfigFiles {
  if (src.kubeconfig) {
    const origin = `--kubeconfig ${src.kubeconfig}`;
    if (!existsSync(src.kubeconfig)) throw new Error(`${origin}: no such file`);
    return { files: [src.kubeconfig], origin };
  }
  if (env.KUBECONFIG) {
    const origin = `KUBECONFIG=${env.KUBECONFIG}`;
    // kubectl skips entries that do not exist; all missing is a mistake worth naming.
    const files = env.KUBECONFIG.split(delimiter).filter((f) => f !== '' && existsSync(f));
    if (files.length === 0) throw new Error(`${origin}: none of these files exists`);
    return { files, origin };
  }
  const home = join(env.HOME ?? homeOf(), '.kube', 'config');
  return { files: existsSync(home) ? [home] : [], origin: home };
}

/** One file; relative paths (client-node does ca/cert/key, we do tokenFile and exec commands) made absolute. */
function loadFile(file: string, tokenFiles: Map<string, string>): KubeConfig {
  const kc = new KubeConfig();
  const text = readFileSync(file, 'utf8');
  if (text.trim() === '') return kc; // kubectl accepts an empty file in the list
  const dir = dirname(file);
  try {
    kc.loadFromString(text);
    kc.makePathsAbsolute(dir);
    for (const u of loadYaml<RawDoc>(text).users ?? []) {
      const f = u.user?.tokenFile;
      if (u.name && f && !tokenFiles.has(u.name)) tokenFiles.set(u.name, isAbsolute(f) ? f : join(dir, f));
    }
  } catch (e) {
    throw new Error(`kubeconfig ${file}: ${(e as Error).message}`);
  }
  // client-go: an exec command with a path separator is relative to the kubeconfig's directory.
  const users = kc
    .getUsers()
    .map((u) =>
      u.exec?.command && !isAbsolute(u.exec.command) && u.exec.command.includes(sep)
        ? { ...u, exec: { ...u.exec, command: join(dir, u.exec.command) } }
        : u,
    );
  kc.loadFromOptions({
    clusters: kc.getClusters(),
    users,
    contexts: kc.getContexts(),
    currentContext: kc.getCurrentContext(),
  });
  return kc;
}

/** kubectl's merge: the first file to define a name wins, and the first to set current-context. */
export function mergeKubeConfigs(parts: KubeConfig[]): KubeConfig {
  const firstWins = <T extends { name: string }>(lists: T[][]) => {
    const byName = new Map<string, T>();
    for (const x of lists.flat()) if (!byName.has(x.name)) byName.set(x.name, x);
    return [...byName.values()];
  };
  const merged = new KubeConfig();
  merged.loadFromOptions({
    clusters: firstWins<Cluster>(parts.map((p) => p.getClusters())),
    users: firstWins<User>(parts.map((p) => p.getUsers())),
    contexts: firstWins<Context>(parts.map((p) => p.getContexts())),
    currentContext: parts.map((p) => p.getCurrentContext()).find((c) => c) ?? '',
  });
  return merged;
}

/** KUBERNETES_EXEC_INFO, as client-go gives it (some plugins pick their output's apiVersion from it). */
function withExecInfo(user: User, cluster: Cluster, where: string): User {
  const exec = user.exec as
    | { apiVersion?: string; command?: string; env?: { name: string; value: string }[] | null }
    | undefined;
  if (!exec) return user;
  if (!exec.command) throw new Error(`${where}.command is missing`);
  if (!EXEC_API_VERSIONS.includes(exec.apiVersion ?? ''))
    throw new Error(
      `${where}.apiVersion ${JSON.stringify(exec.apiVersion ?? '')}: accepted values are ${EXEC_API_VERSIONS.join(', ')}`,
    );
  const provide = (exec as { provideClusterInfo?: boolean }).provideClusterInfo === true;
  const info = {
    apiVersion: exec.apiVersion,
    kind: 'ExecCredential',
    spec: {
      interactive: false,
      ...(provide
        ? {
            cluster: {
              server: cluster.server,
              ...(cluster.tlsServerName ? { 'tls-server-name': cluster.tlsServerName } : {}),
              ...(cluster.skipTLSVerify ? { 'insecure-skip-tls-verify': true } : {}),
              ...(cluster.proxyUrl ? { 'proxy-url': cluster.proxyUrl } : {}),
              ...(cluster.caData || cluster.caFile
                ? {
                    'certificate-authority-data':
                      cluster.caData ?? readFileSync(cluster.caFile as string).toString('base64'),
                  }
                : {}),
            },
          }
        : {}),
    },
  };
  const env = [...(exec.env ?? []), { name: 'KUBERNETES_EXEC_INFO', value: JSON.stringify(info) }];
  return { ...user, exec: { ...exec, env } };
}

/**
 * The kubeconfig in effect, narrowed to one context and checked: the context, its cluster and user
 * exist, the cluster has a server, an exec user is well-formed.
 */
export function loadKubeConfig({ files, origin }: KubeconfigFiles, context?: string): Loaded {
  const tokenFiles = new Map<string, string>();
  const all = mergeKubeConfigs(files.map((f) => loadFile(f, tokenFiles)));
  const name = context ?? all.getCurrentContext();
  if (!name)
    throw new Error(`${origin}: no current-context; pass --context (contexts: ${names(all.getContexts())})`);
  const ctx = all.getContextObject(name);
  if (!ctx)
    throw new Error(
      `${origin}: context "${name}" (${context ? '--context' : 'current-context'}) is not in contexts: ${names(all.getContexts())}`,
    );
  const cluster = all.getCluster(ctx.cluster);
  if (!cluster)
    throw new Error(
      `${origin}: context "${name}" names cluster "${ctx.cluster}", which is not in clusters: ${names(all.getClusters())}`,
    );
  if (!cluster.server) throw new Error(`${origin}: clusters["${cluster.name}"].cluster.server is missing`);
  // No user at all is anonymous access (kubectl allows it); a user named but absent is a mistake.
  const named = ctx.user ? all.getUser(ctx.user) : { name: '' };
  if (!named)
    throw new Error(
      `${origin}: context "${name}" names user "${ctx.user}", which is not in users: ${names(all.getUsers())}`,
    );
  const user = withExecInfo(named, cluster, `${origin}: users["${named.name}"].exec`);
  const kc = new KubeConfig();
  kc.loadFromOptions({ clusters: [cluster], users: [user], contexts: [ctx], currentContext: name });
  return { kc, origin, tokenFiles };
}

/** What failed while getting credentials, with the field to look at. */
function credentialError(user: User | null, e: unknown): Error {
  const msg = (e as Error).message?.trim() || String(e);
  const exec = user?.exec as { command?: string } | undefined;
  if (exec)
    return new Error(
      `users["${user?.name}"].exec: ${JSON.stringify(exec.command)} failed: ${msg || 'no message on stderr'}`,
    );
  return new Error(`users["${user?.name ?? ''}"]: cannot get credentials: ${msg}`);
}

/** The client's authentication from a loaded kubeconfig: client-node fills TLS, agent and headers. */
export function kubeConfigAuth(loaded: Loaded): KubeAuth {
  const { origin, tokenFiles } = loaded;
  let kc = loaded.kc;
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  if (!cluster) throw new Error(`${origin}: no cluster`);
  const tokenFile = user ? tokenFiles.get(user.name) : undefined;
  // Serialised: concurrent first requests would each run the exec plugin (its cache fills on return).
  let last: Promise<unknown> = Promise.resolve();
  const agents = new Set<https.Agent>();
  let issued: string | undefined; // the Authorization of the current credential
  return {
    server: cluster.server,
    describe: `context "${kc.getCurrentContext()}" (user "${user?.name ?? ''}") from ${origin}`,
    async apply() {
      const opts: https.RequestOptions = { headers: {} };
      const run = last.then(() => kc.applyToHTTPSOptions(opts));
      last = run.catch(() => undefined);
      try {
        await run;
      } catch (e) {
        throw credentialError(user, e);
      }
      const agent = opts.agent as https.Agent;
      agents.add(agent);
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(opts.headers ?? {})) if (v !== undefined) headers[k] = String(v);
      if (opts.auth) headers.Authorization = `Basic ${Buffer.from(opts.auth).toString('base64')}`;
      // Re-read per request: token files are rotated (client-go re-reads them too).
      if (tokenFile && !headers.Authorization)
        headers.Authorization = `Bearer ${readFileSync(tokenFile, 'utf8').trim()}`;
      issued = headers.Authorization;
      return { agent, headers };
    },
    // client-node keeps an exec credential until its expiry; a fresh KubeConfig starts without it.
    ...(user?.exec
      ? {
          refresh(sent: Record<string, string>) {
            // Concurrent requests refused with the same old credential: one new one for all.
            if (sent.Authorization !== issued) return;
            issued = undefined;
            const fresh = new KubeConfig();
            fresh.loadFromOptions({
              clusters: kc.getClusters(),
              users: kc.getUsers(),
              contexts: kc.getContexts(),
              currentContext: kc.getCurrentContext(),
            });
            kc = fresh;
          },
        }
      : {}),
    close: () => {
      for (const a of agents) a.destroy();
    },
  };
}

/**
 * The client's authentication as kubectl finds it: --kubeconfig, else $KUBECONFIG, else
 * ~/.kube/config, else the pod's service account (the same lean client the sidecar uses).
 */
export function kubeconfigAuth(src: KubeconfigSource = {}): KubeAuth {
  const env = src.env ?? process.env;
  const found = kubeconfigFiles(src, env);
  if (found.files.length > 0) return kubeConfigAuth(loadKubeConfig(found, src.context));
  let target: KubeTarget | undefined;
  try {
    target = inClusterTarget(env);
  } catch (e) {
    throw new Error(`in-cluster access (KUBERNETES_SERVICE_HOST is set): ${(e as Error).message}`);
  }
  if (!target)
    throw new Error(
      `no cluster access: pass --kubeconfig, set KUBECONFIG, create ${found.origin}, or run in a pod with a service account`,
    );
  if (src.context) throw new Error(`--context ${src.context}: no kubeconfig found, only in-cluster access`);
  return targetAuth(target);
}
