// The lab's highly available control plane (`make cluster CONTROL_PLANES=3`), laid out as RKE2 lays
// out its servers: every control-plane node runs an etcd member (one cluster, peers on the node
// IPs) and a kube-apiserver on :6443 that talks to its own member only (127.0.0.1:2379) and
// advertises the node IP, so the `kubernetes` Service's endpoints are the API servers themselves
// (the lease endpoint reconciler). The node's kubelet, kube-proxy, controller-manager and
// scheduler use https://127.0.0.1:6443: that node's API server and no other. That is what lets
// one node's view go stale while the cluster moves on — remove its etcd member and its API server
// keeps answering from its watch cache (issue 23; what it answers is in docs/lab-cluster.md).
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from '../../shared/clock.ts';
import { KubeClient, type KubeClientOptions } from '../../shared/kube/client.ts';
import type { KubeTarget } from '../../shared/kube/in-cluster.ts';
import {
  type ControlPlane,
  clusterArgs,
  k8sBinDir,
  kubeConfigFrom,
  kubeconfigJson,
  makePki,
  servingArgs,
  writeTokens,
} from '../bed/control-plane.ts';
import type { TestNode } from '../bed/netns.ts';
import { killAndWait, pidAlive, sh } from '../bed/proc.ts';
import { etcdBinary, kubectlBinary } from '../versions.ts';
import { memberAdd, memberHealthy, memberList } from './etcd-cluster.ts';

export const API_PORT = 6443;
export const ETCD_CLIENT_PORT = 2379;
const ETCD_PEER_PORT = 2380;
/** Where a control-plane node's own components find its API server (RKE2's choice). */
export const LOCAL_API = `https://127.0.0.1:${API_PORT}`;

export interface ControlPlaneMember {
  /** The node's name (its kubelet registers under it). */
  name: string;
  node: TestNode;
  ip: string;
  /** This member's API server from outside the node: https://<node IP>:6443. */
  server: string;
  /** This member's etcd client URL from outside the node. */
  etcdClientURL: string;
  etcdPid: number;
  apiserverPid: number;
  /** Admin kubeconfig against this member's API server only. */
  kubeconfigPath: string;
  /** An admin client against this member's API server only (onResult: each request's outcome). */
  client(onResult?: KubeClientOptions['onResult']): KubeClient;
  /** kubectl against this member's API server only. */
  kubectl(
    args: string[],
    opts?: { input?: string },
  ): Promise<{ code: number; stdout: string; stderr: string }>;
}

/** A ControlPlane (the single one's interface: admin access goes to the first member) with members. */
export interface HaControlPlane extends ControlPlane {
  members: ControlPlaneMember[];
  member(name: string): ControlPlaneMember;
  /**
   * The member whose API server `kubectl` and `client()` talk to (default the first): a test that
   * makes one member's API server stale moves its own admin access to another one first.
   */
  readonly admin: ControlPlaneMember;
  useAdmin(name: string): void;
  /**
   * A removed member back (`etcdctl member add`, its etcd started again on a fresh data dir with
   * --initial-cluster-state existing); resolves once its API server answers a consistent read.
   */
  rejoin(name: string): Promise<void>;
  /** A user's kubeconfig against https://127.0.0.1:6443, for components on a control-plane node. */
  localKubeconfig(user: string): string;
  /** The API VIP the serving certificate names (served once lab/cluster/api-vip.ts installs it). */
  apiVip: string;
}

export interface HaControlPlaneOptions {
  /** The control-plane node namespaces (on the lab switch). */
  nodes: TestNode[];
  /** Users with static tokens, as startControlPlane's. */
  users: { name: string; groups?: string[] }[];
  /** State directory (certificates, tokens, etcd data, logs). */
  dir: string;
  /** Extra IP SANs of the serving certificate (the host link's address). */
  sanIPs?: string[];
  /** The API VIP on the switch (in the serving certificate too). */
  apiVip: string;
  /** Called with every pid started, before it is awaited (for teardown by pid). */
  onPid(pid: number): void;
}

function etcdArgs(
  m: TestNode,
  all: TestNode[],
  dir: string,
  token: string,
  state: 'new' | 'existing' = 'new',
): string[] {
  return [
    etcdBinary(),
    '--name',
    m.name,
    '--data-dir',
    join(dir, `etcd-${m.name}`),
    '--listen-client-urls',
    `http://127.0.0.1:${ETCD_CLIENT_PORT},http://${m.ipv4}:${ETCD_CLIENT_PORT}`,
    '--advertise-client-urls',
    `http://${m.ipv4}:${ETCD_CLIENT_PORT}`,
    '--listen-peer-urls',
    `http://${m.ipv4}:${ETCD_PEER_PORT}`,
    '--initial-advertise-peer-urls',
    `http://${m.ipv4}:${ETCD_PEER_PORT}`,
    '--initial-cluster',
    all.map((n) => `${n.name}=http://${n.ipv4}:${ETCD_PEER_PORT}`).join(','),
    '--initial-cluster-state',
    state,
    '--initial-cluster-token',
    token,
    // Lean for a 2-core machine: fewer snapshots held in memory, no metrics by default.
    '--snapshot-count',
    '10000',
    '--log-level',
    'warn',
  ];
}

function apiserverArgs(m: TestNode, dir: string): string[] {
  return [
    join(k8sBinDir(), 'kube-apiserver'),
    // Its own member only, as RKE2 configures it: a removed member leaves this server without etcd.
    '--etcd-servers',
    `http://127.0.0.1:${ETCD_CLIENT_PORT}`,
    '--bind-address',
    '0.0.0.0',
    '--secure-port',
    String(API_PORT),
    '--advertise-address',
    m.ipv4,
    // Each server holds a lease (15 s) for its address in the `kubernetes` Service's endpoints.
    '--endpoint-reconciler-type',
    'lease',
    ...clusterArgs(dir),
    ...servingArgs(dir),
    // LAB_APISERVER_V=3: each request logged with its latency and source (httplog), to see which
    // server a client's request reached and how long it took there (bench-seed's diagnosis).
    // After clusterArgs: its --v 1 would win otherwise (the last one counts).
    ...(process.env.LAB_APISERVER_V ? ['--v', process.env.LAB_APISERVER_V] : []),
  ];
}

export async function startHaControlPlane(opts: HaControlPlaneOptions): Promise<HaControlPlane> {
  const { dir, nodes } = opts;
  if (nodes.length < 1) throw new Error('startHaControlPlane: no control-plane nodes');
  makePki(dir, [...nodes.map((n) => n.ipv4), opts.apiVip, ...(opts.sanIPs ?? [])]);
  const tokens = writeTokens(dir, opts.users);
  const ca = readFileSync(join(dir, 'ca.crt'), 'utf8');
  const token = (user: string) => {
    const t = tokens.get(user);
    if (!t) throw new Error(`no user ${user}: pass it in startHaControlPlane({ users })`);
    return t.token;
  };
  const writeKubeconfig = (file: string, server: string, user: string) => {
    const p = join(dir, file);
    writeFileSync(p, kubeconfigJson(server, ca, user, token(user)), { mode: 0o600 });
    return p;
  };
  const spawnIn = (node: TestNode, logName: string, cmd: string[]): ChildProcess => {
    const fd = openSync(join(dir, `${logName}.log`), 'a');
    const [bin, ...args] = ['nsenter', `--net=/run/netns/${node.ns}`, ...cmd] as [string, ...string[]];
    const child = spawn(bin, args, { stdio: ['ignore', fd, fd], detached: true });
    child.unref();
    if (child.pid) opts.onPid(child.pid);
    return child;
  };

  const clusterToken = `dglab-${randomBytes(4).toString('hex')}`;
  const etcds = nodes.map((n) => spawnIn(n, `etcd-${n.name}`, etcdArgs(n, nodes, dir, clusterToken)));
  const members: ControlPlaneMember[] = nodes.map((n, i) => {
    const server = `https://${n.ipv4}:${API_PORT}`;
    const kubeconfigPath = writeKubeconfig(`kubeconfig-${n.name}.json`, server, 'admin');
    const target: KubeTarget = { server, ca, token: token('admin') };
    return {
      name: n.name,
      node: n,
      ip: n.ipv4,
      server,
      etcdClientURL: `http://${n.ipv4}:${ETCD_CLIENT_PORT}`,
      etcdPid: etcds[i]?.pid ?? 0,
      apiserverPid: 0,
      kubeconfigPath,
      client: (onResult) => new KubeClient(target, onResult ? { onResult } : {}),
      kubectl: (args, o = {}) =>
        sh([kubectlBinary(), '--kubeconfig', kubeconfigPath, ...args], {
          timeoutMs: 0,
          ...(o.input === undefined ? {} : { input: o.input }),
        }),
    };
  });
  const first = members[0] as ControlPlaneMember;
  const logTail = (name: string) => {
    try {
      return readFileSync(join(dir, `${name}.log`), 'utf8').slice(-3000);
    } catch {
      return '(no log)';
    }
  };
  const startApiServer = async (m: ControlPlaneMember) => {
    m.apiserverPid = spawnIn(m.node, `apiserver-${m.name}`, apiserverArgs(m.node, dir)).pid ?? 0;
    const probe = m.client();
    try {
      await waitFor(
        `${m.name}: kube-apiserver /readyz`,
        async () => {
          if (!pidAlive(m.apiserverPid)) return true;
          return probe.get('/readyz', { timeoutMs: 2_000, text: true }).then(
            () => true,
            () => false,
          );
        },
        { timeoutMs: 180_000, intervalMs: 250 },
      );
    } catch (e) {
      throw new Error(
        `${(e as Error).message}\n--- apiserver-${m.name}.log\n${logTail(`apiserver-${m.name}`)}`,
      );
    } finally {
      probe.close();
    }
    if (!pidAlive(m.apiserverPid))
      throw new Error(`${m.name}: kube-apiserver exited:\n${logTail(`apiserver-${m.name}`)}`);
  };
  // Each API server waits for etcd itself. The first starts alone and runs the bootstrap
  // controllers; the others then find their objects. Started together, two servers' IP repair
  // controllers raced to create the `kubernetes` Service's IPAddress: the loser's "10.96.0.1 already
  // exists" is not retried, its post-start hook timed out and it exited (a clean-clone run under
  // load, 2026-11-29).
  const startApiServers = async () => {
    await startApiServer(first);
    await Promise.all(members.filter((m) => m !== first).map(startApiServer));
  };
  await startApiServers();
  const kubeconfigPath = writeKubeconfig('kubeconfig.json', first.server, 'admin');
  let admin = first;
  const kubectl: ControlPlane['kubectl'] = (args, o = {}) =>
    sh([kubectlBinary(), '--kubeconfig', o.kubeconfig ?? admin.kubeconfigPath, ...args], {
      timeoutMs: 0,
      ...(o.input === undefined ? {} : { input: o.input }),
    });
  const target: KubeTarget = { server: first.server, ca, token: token('admin') };
  const member = (name: string) => {
    const m = members.find((x) => x.name === name);
    if (!m)
      throw new Error(
        `no control-plane member ${name}; members are ${members.map((x) => x.name).join(', ')}`,
      );
    return m;
  };
  const cp: HaControlPlane = {
    dir,
    server: first.server,
    kubeconfigPath,
    target,
    get etcdPid() {
      return first.etcdPid;
    },
    get apiserverPid() {
      return first.apiserverPid;
    },
    members,
    apiVip: opts.apiVip,
    member,
    get admin() {
      return admin;
    },
    useAdmin(name) {
      admin = member(name);
    },
    async rejoin(name) {
      const m = member(name);
      const via = members.find((x) => x !== m && pidAlive(x.etcdPid));
      if (!via) throw new Error(`rejoin ${name}: no other etcd member runs`);
      await killAndWait(m.etcdPid);
      const peerURL = `http://${m.ip}:${ETCD_PEER_PORT}`;
      const listed = await memberList(via.etcdClientURL);
      if (!listed.some((x) => x.peerURLs.includes(peerURL))) await memberAdd(via.etcdClientURL, [peerURL]);
      rmSync(join(dir, `etcd-${m.name}`), { recursive: true, force: true });
      m.etcdPid =
        spawnIn(m.node, `etcd-${m.name}`, etcdArgs(m.node, nodes, dir, clusterToken, 'existing')).pid ?? 0;
      await waitFor(`${name}: its etcd member healthy again`, () => memberHealthy(m.etcdClientURL), {
        timeoutMs: 120_000,
        intervalMs: 250,
      });
      // A new API server too, as an operator repairing the node would do: the old one answered
      // consistent reads again at once, but its watch cache stayed frozen for minutes (its kubelet
      // never saw a new pod: robustness CONTROL_PLANES=3 SEED=4 TRIAL=8). Asked from inside the
      // node over loopback: drainguard's stale API server fence refuses every other source until
      // the drain ends.
      await killAndWait(m.apiserverPid);
      m.apiserverPid = spawnIn(m.node, `apiserver-${m.name}`, apiserverArgs(m.node, dir)).pid ?? 0;
      const local = writeKubeconfig(`kubeconfig-local-admin.json`, LOCAL_API, 'admin');
      await waitFor(
        `${name}: its new API server answers from etcd`,
        async () => {
          if (!pidAlive(m.apiserverPid))
            throw new Error(`${name}: kube-apiserver exited:\n${logTail(`apiserver-${m.name}`)}`);
          const r = await m.node.exec(
            [kubectlBinary(), '--kubeconfig', local, 'get', '--raw', '/api/v1/namespaces/default'],
            {
              timeoutMs: 5_000,
            },
          );
          return r.code === 0;
        },
        { timeoutMs: 180_000, intervalMs: 500 },
      );
    },
    client: () => new KubeClient({ server: admin.server, ca, token: token('admin') }),
    kubeConfig: () => kubeConfigFrom(kubeconfigPath),
    kubectl,
    userTarget: (name) => ({ server: first.server, ca, token: token(name) }),
    userKubeconfig: (name) =>
      writeKubeconfig(`kubeconfig-${name.replace(/[^a-zA-Z0-9_.-]/g, '_')}.json`, first.server, name),
    localKubeconfig: (name) =>
      writeKubeconfig(`kubeconfig-local-${name.replace(/[^a-zA-Z0-9_.-]/g, '_')}.json`, LOCAL_API, name),
    // Every member's: the single control plane's callers mean "the API is down".
    async stopApiServer() {
      await Promise.all(members.map((m) => killAndWait(m.apiserverPid)));
    },
    async startApiServer() {
      await startApiServers();
    },
    async stop() {
      await Promise.all(members.map((m) => killAndWait(m.apiserverPid)));
      await Promise.all(members.map((m) => killAndWait(m.etcdPid)));
    },
  };
  await waitFor('namespace default', async () => (await kubectl(['get', 'ns', 'default'])).code === 0, {
    timeoutMs: 60_000,
    intervalMs: 200,
  });
  return cp;
}
