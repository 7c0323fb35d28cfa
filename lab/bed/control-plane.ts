// A real etcd + kube-apiserver (lab/versions.env's versions) on free ports, for tests and `make cluster`.
// Nothing here is simulated: admission webhooks, RBAC, watches, conflicts and API
// priority-and-fairness are the real server's. What it lacks (kubelet, controllers) tests play.
import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '../../shared/clock.ts';
import { KubeClient } from '../../shared/kube/client.ts';
import type { KubeTarget } from '../../shared/kube/in-cluster.ts';
import { createCA, createClientCert, createServingCert } from '../../shared/pki.ts';
import { etcdBinary, KUBERNETES_VERSION, kubectlBinary, kubernetesBinDir } from '../versions.ts';
import { atExit, quietly } from './exit.ts';
import { killAndWait, pidAlive, sh } from './proc.ts';

export const APISERVER_VERSION = KUBERNETES_VERSION;
/** Where scripts/build-upstream.sh caches the Kubernetes binaries (and the pause source). */
export const k8sBinDir = kubernetesBinDir;
export const apiserverBinary = () => join(k8sBinDir(), 'kube-apiserver');

export interface ControlPlaneOptions {
  /** Address the API server listens on; default 127.0.0.1. */
  bindAddress?: string;
  /** Extra IP SANs for the serving certificate (e.g. the host's address on a test switch). */
  sanIPs?: string[];
  extraApiServerArgs?: string[];
  /** Extra users with static tokens (name system:serviceaccount:<ns>:<sa> acts as that service account). */
  users?: { name: string; groups?: string[] }[];
  /** Where state lives; default a fresh temp dir (removed on stop). */
  dir?: string;
  /** Keep running after this process exits (`make cluster`). */
  detached?: boolean;
  /**
   * Serve a whole cluster (lab/cluster/) instead of a bare API server: service-account admission
   * on (kube-controller-manager mints the tokens), the `kubernetes` Service's endpoint reconciled
   * to bindAddress, Node authorization for kubelets, and webhooks/aggregated APIs dialled at their
   * endpoints (the API server runs outside every node, so it has no kube-proxy for ClusterIPs).
   */
  cluster?: boolean;
  /** The API server's audit log at Metadata level, one JSON line per request (make bench-api). */
  auditLog?: boolean;
}

export interface ControlPlane {
  dir: string;
  server: string;
  kubeconfigPath: string;
  target: KubeTarget;
  etcdPid: number;
  apiserverPid: number;
  /** Set when started with auditLog. */
  auditLogPath?: string;
  client(): KubeClient;
  /** The same admin access as @kubernetes/client-node's KubeConfig (for code that uses that library). */
  kubeConfig(): Promise<import('@kubernetes/client-node').KubeConfig>;
  kubectl(
    args: string[],
    opts?: { input?: string; kubeconfig?: string },
  ): Promise<{ code: number; stdout: string; stderr: string }>;
  userTarget(name: string): KubeTarget;
  userKubeconfig(name: string): string;
  stopApiServer(): Promise<void>;
  startApiServer(): Promise<void>;
  stop(): Promise<void>;
}

export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** CA, API serving cert (SANs: loopback, kubernetes.default names, extra IPs) and the SA signing key. */
export function makePki(dir: string, sanIPs: string[]): void {
  const ca = createCA('drainguard-test-ca', 2);
  const serving = createServingCert(ca, {
    commonName: 'kube-apiserver',
    dnsNames: [
      'localhost',
      'kubernetes',
      'kubernetes.default',
      'kubernetes.default.svc',
      'kubernetes.default.svc.cluster.local',
    ],
    ipAddresses: ['127.0.0.1', '10.96.0.1', ...sanIPs],
    days: 2,
  });
  const sa = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const files: Record<string, string> = {
    'ca.crt': ca.certPem,
    'apiserver.crt': serving.certPem,
    'apiserver.key': serving.keyPem,
    'sa.key': sa.privateKey,
    'sa.pub': sa.publicKey,
  };
  // How the API server authenticates to kubelets (logs, exec, port-forward).
  const kubeletClient = createClientCert(ca, {
    commonName: 'kube-apiserver-kubelet-client',
    organization: 'system:masters',
    days: 2,
  });
  files['kubelet-client.crt'] = kubeletClient.certPem;
  files['kubelet-client.key'] = kubeletClient.keyPem;
  for (const [name, pem] of Object.entries(files)) writeFileSync(join(dir, name), pem, { mode: 0o600 });
}

export function kubeconfigJson(server: string, ca: string, user: string, token: string): string {
  return JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'drainguard-test',
      clusters: [
        {
          name: 'test',
          cluster: { server, 'certificate-authority-data': Buffer.from(ca).toString('base64') },
        },
      ],
      users: [{ name: user, user: { token } }],
      contexts: [{ name: 'drainguard-test', context: { cluster: 'test', user } }],
    },
    null,
    2,
  );
}

/** @kubernetes/client-node's KubeConfig from a file (loaded only when asked for: it is large). */
export async function kubeConfigFrom(path: string): Promise<import('@kubernetes/client-node').KubeConfig> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}

/** Static tokens for admin (system:masters) and each user, written to <dir>/tokens.csv. */
export function writeTokens(
  dir: string,
  users: { name: string; groups?: string[] }[],
): Map<string, { token: string; groups: string[] }> {
  const tokens = new Map<string, { token: string; groups: string[] }>();
  tokens.set('admin', { token: randomBytes(24).toString('hex'), groups: ['system:masters'] });
  for (const u of users)
    tokens.set(u.name, { token: randomBytes(24).toString('hex'), groups: u.groups ?? [] });
  writeFileSync(
    join(dir, 'tokens.csv'),
    [...tokens].map(([name, t], i) => `${t.token},${name},uid-${i},"${t.groups.join(',')}"`).join('\n') +
      '\n',
    { mode: 0o600 },
  );
  return tokens;
}

/** A whole cluster's API server (lab/cluster/): Node authorization, kubelet client certificate. */
export function clusterArgs(dir: string): string[] {
  return [
    '--authorization-mode',
    'Node,RBAC',
    '--enable-admission-plugins',
    'NodeRestriction',
    '--enable-aggregator-routing',
    '--kubelet-client-certificate',
    join(dir, 'kubelet-client.crt'),
    '--kubelet-client-key',
    join(dir, 'kubelet-client.key'),
    '--kubelet-preferred-address-types',
    'InternalIP',
  ];
}

/** TLS, tokens, service accounts and logging from makePki's and the tokens file in dir. */
export function servingArgs(dir: string): string[] {
  return [
    '--tls-cert-file',
    join(dir, 'apiserver.crt'),
    '--tls-private-key-file',
    join(dir, 'apiserver.key'),
    '--client-ca-file',
    join(dir, 'ca.crt'),
    '--token-auth-file',
    join(dir, 'tokens.csv'),
    '--service-account-key-file',
    join(dir, 'sa.pub'),
    '--service-account-signing-key-file',
    join(dir, 'sa.key'),
    '--service-account-issuer',
    'https://kubernetes.default.svc',
    '--service-cluster-ip-range',
    '10.96.0.0/16',
    '--allow-privileged',
    '--profiling=false',
    '--v',
    '1',
  ];
}

/** Every request at Metadata level (who, verb, URI, code: no bodies), past the RequestReceived stage. */
function auditArgs(dir: string): string[] {
  const policy = join(dir, 'audit-policy.json');
  const rules = [{ level: 'Metadata' }];
  writeFileSync(
    policy,
    JSON.stringify({ apiVersion: 'audit.k8s.io/v1', kind: 'Policy', omitStages: ['RequestReceived'], rules }),
  );
  return ['--audit-policy-file', policy, '--audit-log-path', join(dir, 'audit.log')];
}

const STATE_PREFIX = 'drainguard-cp-';

/** Removes control planes left by earlier runs whose owning process is gone (crash, Ctrl-C, kill -9). */
export async function reapLeftovers(base = tmpRoot()): Promise<void> {
  if (!existsSync(base)) return;
  for (const name of readdirSync(base)) {
    if (!name.startsWith(STATE_PREFIX)) continue;
    const dir = join(base, name);
    try {
      const st = JSON.parse(readFileSync(join(dir, 'pids.json'), 'utf8')) as {
        owner: number;
        etcd?: number;
        apiserver?: number;
        detached?: boolean;
      };
      if (st.detached || pidAlive(st.owner)) continue;
      await killAndWait(st.apiserver);
      await killAndWait(st.etcd);
    } catch {
      // No pid file: another process may be creating this control plane right now. Only a
      // directory left untouched for ten minutes is an orphan.
      if (Date.now() - statSync(dir).mtimeMs < 10 * 60_000) continue;
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

// etcd's fsyncs dominate API latency on a small disk; tmpfs keeps tests fast. Data is throwaway.
const tmpRoot = () => (existsSync('/dev/shm') ? '/dev/shm' : tmpdir());

const live = new Set<ControlPlane>();
/** A test process that dies must not leave servers running. */
function killLiveServers(): void {
  for (const cp of live) {
    for (const pid of [cp.apiserverPid, cp.etcdPid]) quietly(() => process.kill(pid, 'SIGKILL'));
    rmSync(cp.dir, { recursive: true, force: true });
  }
}

export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const bin = apiserverBinary();
  for (const b of [bin, etcdBinary()])
    if (!existsSync(b)) throw new Error(`${b} not found: run scripts/bootstrap.sh (make bootstrap) first`);
  if (!opts.detached) await reapLeftovers();
  const dir = opts.dir ?? mkdtempSync(join(tmpRoot(), STATE_PREFIX));
  mkdirSync(dir, { recursive: true });
  // Claim the directory at once, so a concurrent reapLeftovers() sees a live owner.
  writeFileSync(
    join(dir, 'pids.json'),
    JSON.stringify({ owner: process.pid, detached: Boolean(opts.detached) }),
  );
  makePki(dir, opts.sanIPs ?? []);
  const bind = opts.bindAddress ?? '127.0.0.1';
  const apiPort = await freePort(bind);
  const tokens = writeTokens(dir, opts.users ?? []);
  const ca = readFileSync(join(dir, 'ca.crt'), 'utf8');
  const server = `https://${bind}:${apiPort}`;
  const kubeconfigPath = join(dir, 'kubeconfig.json');
  writeFileSync(kubeconfigPath, kubeconfigJson(server, ca, 'admin', tokens.get('admin')!.token), {
    mode: 0o600,
  });
  const logFd = (name: string) => {
    const p = join(dir, `${name}.log`);
    writeFileSync(p, '');
    return p;
  };
  const spawnLogged = (cmd: string, args: string[], logName: string): ChildProcess => {
    const out = logFd(logName);
    const child = spawn('bash', ['-c', 'exec "$@" >>"$LOG" 2>&1', 'bash', cmd, ...args], {
      env: { ...process.env, LOG: out },
      stdio: 'ignore',
      detached: true, // own process group: Ctrl-C to a test does not race our orderly stop
    });
    child.unref();
    return child;
  };
  // A free port is free when asked, not when etcd binds it: any outbound connection may take it as
  // its source port meanwhile (CI: kube-apiserver gave up on etcd's port after 20 s, connection
  // refused). etcd answers /health before the API server starts; one that exits is started
  // again on new ports.
  const startEtcd = async (): Promise<{ child: ChildProcess; port: number }> => {
    for (let attempt = 1; ; attempt++) {
      const [port, peerPort] = [await freePort(), await freePort()];
      rmSync(join(dir, 'etcd'), { recursive: true, force: true });
      const child = spawnLogged(
        etcdBinary(),
        [
          '--name',
          'default',
          '--data-dir',
          join(dir, 'etcd'),
          '--listen-client-urls',
          `http://127.0.0.1:${port}`,
          '--advertise-client-urls',
          `http://127.0.0.1:${port}`,
          '--listen-peer-urls',
          `http://127.0.0.1:${peerPort}`,
          '--initial-advertise-peer-urls',
          `http://127.0.0.1:${peerPort}`,
          '--initial-cluster',
          `default=http://127.0.0.1:${peerPort}`,
          '--log-level',
          'warn',
        ],
        'etcd',
      );
      const pid = child.pid ?? 0;
      const healthy = async () => {
        try {
          const r = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1_000) });
          return r.ok && ((await r.json()) as { health?: string }).health === 'true';
        } catch {
          return false;
        }
      };
      await waitFor('etcd /health', async () => (await healthy()) || !pidAlive(pid), {
        timeoutMs: 60_000,
        intervalMs: 100,
      }).catch(() => undefined);
      if (pidAlive(pid) && (await healthy())) return { child, port };
      const log = readFileSync(join(dir, 'etcd.log'), 'utf8').slice(-2000);
      await killAndWait(pid);
      if (attempt >= 3) throw new Error(`etcd did not start in ${attempt} attempts:\n${log}`);
    }
  };
  const { child: etcd, port: etcdPort } = await startEtcd();
  const apiArgs = [
    '--etcd-servers',
    `http://127.0.0.1:${etcdPort}`,
    '--secure-port',
    String(apiPort),
    '--bind-address',
    bind,
    // The advertise address only names the "kubernetes" Service endpoint, which must not be loopback;
    // with the reconciler off nothing is ever sent to it.
    '--advertise-address',
    bind.startsWith('127.') || bind === '0.0.0.0' ? '192.0.2.1' : bind,
    ...(opts.cluster
      ? clusterArgs(dir)
      : [
          '--endpoint-reconciler-type',
          'none',
          '--authorization-mode',
          'RBAC',
          '--disable-admission-plugins',
          'ServiceAccount',
        ]),
    ...servingArgs(dir),
    ...(opts.auditLog ? auditArgs(dir) : []),
    ...(opts.extraApiServerArgs ?? []),
  ];
  const state = { owner: process.pid, etcd: etcd.pid, apiserver: 0, detached: Boolean(opts.detached) };
  const savePids = () => writeFileSync(join(dir, 'pids.json'), JSON.stringify(state));
  savePids();
  const target: KubeTarget = { server, ca, token: tokens.get('admin')!.token };
  const probe = new KubeClient(target);
  const ready = async () => {
    try {
      await probe.get('/readyz', { timeoutMs: 2_000, text: true });
      return true;
    } catch {
      return false;
    }
  };
  const startApiServer = async () => {
    const child = spawnLogged(bin, apiArgs, 'apiserver');
    state.apiserver = child.pid ?? 0;
    cp.apiserverPid = state.apiserver;
    savePids();
    try {
      await waitFor('kube-apiserver /readyz', async () => (await ready()) || !pidAlive(state.apiserver), {
        timeoutMs: 90_000,
        intervalMs: 100,
      });
    } catch (e) {
      throw new Error(
        `${(e as Error).message}\n--- apiserver.log (tail)\n${readFileSync(join(dir, 'apiserver.log'), 'utf8').slice(-3000)}`,
      );
    }
    if (!pidAlive(state.apiserver))
      throw new Error(
        `kube-apiserver exited:\n${readFileSync(join(dir, 'apiserver.log'), 'utf8').slice(-3000)}`,
      );
  };
  const kubectl: ControlPlane['kubectl'] = (args, o = {}) =>
    // No time limit: a kubectl drain waits for evictions as long as the test lets it.
    sh([kubectlBinary(), '--kubeconfig', o.kubeconfig ?? kubeconfigPath, ...args], {
      timeoutMs: 0,
      ...(o.input === undefined ? {} : { input: o.input }),
    });
  const cp: ControlPlane = {
    dir,
    server,
    kubeconfigPath,
    ...(opts.auditLog ? { auditLogPath: join(dir, 'audit.log') } : {}),
    target,
    etcdPid: etcd.pid ?? 0,
    apiserverPid: 0,
    client: () => new KubeClient(target),
    kubeConfig: () => kubeConfigFrom(kubeconfigPath),
    kubectl,
    userTarget(name) {
      const t = tokens.get(name);
      if (!t) throw new Error(`no user ${name}: pass it in startControlPlane({ users })`);
      return { server, ca, token: t.token };
    },
    userKubeconfig(name) {
      const t = tokens.get(name);
      if (!t) throw new Error(`no user ${name}: pass it in startControlPlane({ users })`);
      const p = join(dir, `kubeconfig-${name.replace(/[^a-zA-Z0-9_.-]/g, '_')}.json`);
      writeFileSync(p, kubeconfigJson(server, ca, name, t.token), { mode: 0o600 });
      return p;
    },
    async stopApiServer() {
      await killAndWait(state.apiserver);
    },
    startApiServer,
    async stop() {
      live.delete(cp);
      probe.close();
      await killAndWait(state.apiserver);
      await killAndWait(state.etcd);
      if (!opts.dir) rmSync(dir, { recursive: true, force: true });
    },
  };
  if (!opts.detached) {
    atExit(killLiveServers, { signals: true });
    live.add(cp);
  }
  try {
    await startApiServer();
    // Objects every test expects: the default namespace exists once the bootstrap controller ran.
    await waitFor('namespace default', async () => (await kubectl(['get', 'ns', 'default'])).code === 0, {
      timeoutMs: 90_000,
      intervalMs: 200,
    });
  } catch (e) {
    await cp.stop();
    throw e;
  }
  return cp;
}

let shared: Promise<ControlPlane> | undefined;
/** A user of the shared control plane that RBAC grants nothing (for 403 paths). */
export const UNPRIVILEGED_USER = 'drainguard-test-nobody';
/** One control plane per test process; tests use their own namespaces. Stopped at exit. */
export function sharedControlPlane(): Promise<ControlPlane> {
  shared ??= startControlPlane({ users: [{ name: UNPRIVILEGED_USER }] });
  return shared;
}
