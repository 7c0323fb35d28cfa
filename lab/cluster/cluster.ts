// A whole Kubernetes cluster (lab/versions.env's versions) on one machine, for `make cluster`, the demo and the tests:
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler in the root namespace, and
// nodes (default node-a, node-b, node-c), each a network namespace on the lab switch with its own
// containerd, kubelet and kube-proxy, pods on a CNI bridge, and every lab image imported (nothing
// is ever pulled). What runs here is real; only what the pods run may be a simulator (lab/sim/).
import { type ChildProcess, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { waitFor } from '../../shared/clock.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { type ControlPlane, k8sBinDir, startControlPlane } from '../bed/control-plane.ts';
import { atExit } from '../bed/exit.ts';
import { createTestBed, type TestBed } from '../bed/netns.ts';
import { pidAlive, sh } from '../bed/proc.ts';
import { type HaControlPlane, startHaControlPlane } from './ha-control-plane.ts';
import { goldenRoot, type ImageList } from './images.ts';
import { type LabNode, makeCgroupRoot, startNode } from './node.ts';
import { LAB_POOL_HOSTS } from './pool.ts';
import { type ClusterState, teardownCluster } from './teardown.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');
export const SERVICE_CIDR = '10.96.0.0/16';
const STATE_PREFIX = 'drainguard-cluster-';

export interface ClusterOptions {
  /** Worker nodes (default node-a, node-b, node-c). */
  nodes?: string[];
  /**
   * Control-plane nodes (default 1: etcd and one API server in the root namespace, no node). With
   * N > 1, nodes cp-1..cp-N each run an etcd member, an API server, the controllers and a kubelet
   * (ha-control-plane.ts).
   */
  controlPlanes?: number;
  /** Namespaces on the switch that are not nodes (an ARP client, say), reachable as bed.node(name). */
  clients?: string[];
  /** State directory; default a fresh one under the temp dir. */
  dir?: string;
  /** Keep running after this process exits (`make cluster`; `make cluster-down` stops it). */
  detached?: boolean;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

export interface Cluster {
  dir: string;
  kubeconfigPath: string;
  server: string;
  cp: ControlPlane;
  /** The control-plane members, when started with controlPlanes > 1. */
  ha: HaControlPlane | undefined;
  bed: TestBed;
  nodes: LabNode[];
  node(name: string): LabNode;
  client(): KubeClient;
  kubectl(
    args: string[],
    opts?: { input?: string },
  ): Promise<{ code: number; stdout: string; stderr: string }>;
  /** kubectl that throws with stderr on a non-zero exit. */
  k(args: string[], opts?: { input?: string }): Promise<string>;
  /** The tail of every component's log, for a failing test's output. */
  logs(tailBytes?: number): string;
  /** The control plane's log files by component (`<member>/<component>` on an HA plane). */
  controlPlaneLogs(): Record<string, string>;
  stop(): Promise<void>;
}

/** Builds (or finds cached) the lab images through `make image`'s script; returns their list. */
export async function ensureImages(): Promise<ImageList> {
  const r = await sh(['bash', join(ROOT, 'scripts', 'build-images.sh')], { timeoutMs: 0 });
  if (r.code !== 0) throw new Error(`scripts/build-images.sh failed:\n${r.stderr.slice(-3000)}`);
  const path = r.stdout.trim().split('\n').pop() ?? '';
  return JSON.parse(readFileSync(path, 'utf8')) as ImageList;
}

/** A block of eight /24s in 198.18.0.0/15 (RFC 2544 test range) no root-namespace route uses. */
async function pickPodBlock(): Promise<number> {
  const routes = (await sh(['ip', '-4', 'route', 'show', 'table', 'all'])).stdout;
  for (let k = 0; k < 32; k++) {
    const used = [...Array(8).keys()].some((i) => routes.includes(`198.18.${k * 8 + i}.`));
    if (!used) return k * 8;
  }
  throw new Error('no free /21 in 198.18.0.0/16 for pod subnets');
}

/** Removes clusters left by earlier runs whose owning process is gone. */
export function reapLeftoverClusters(base = tmpdir()): void {
  for (const name of existsSync(base) ? readdirSync(base) : []) {
    if (!name.startsWith(STATE_PREFIX)) continue;
    try {
      const st = JSON.parse(readFileSync(join(base, name, 'cluster.json'), 'utf8')) as ClusterState;
      if (st.detached || pidAlive(st.owner)) continue;
      teardownCluster(st);
    } catch {}
  }
}

const live = new Set<ClusterState>();
/** A process that dies must not leave its cluster running (unless detached). */
const teardownLive = () => {
  for (const st of live) teardownCluster(st);
};

export async function startCluster(opts: ClusterOptions = {}): Promise<Cluster> {
  const haCount = opts.controlPlanes ?? 1;
  const cpNames = haCount > 1 ? [...Array(haCount).keys()].map((i) => `cp-${i + 1}`) : [];
  const names = [...cpNames, ...(opts.nodes ?? ['node-a', 'node-b', 'node-c'])];
  const t0 = Date.now();
  const log = (line: string) => opts.log?.(`${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s  ${line}`);
  const bins = k8sBinDir();
  for (const b of ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubelet', 'kube-proxy'])
    if (!existsSync(join(bins, b))) throw new Error(`${join(bins, b)} not found: run make bootstrap first`);
  if (!opts.detached) reapLeftoverClusters();
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), STATE_PREFIX));
  mkdirSync(dir, { recursive: true });
  const id =
    dir
      .split('-')
      .pop()
      ?.replace(/[^a-zA-Z0-9]/g, '')
      .slice(-6) ?? 'x';
  const st: ClusterState = {
    owner: process.pid,
    detached: Boolean(opts.detached),
    dir,
    pids: [],
    netns: [],
    routes: [],
    cgroups: [],
  };
  const save = () => writeFileSync(join(dir, 'cluster.json'), JSON.stringify(st, null, 2));
  save();
  if (!opts.detached) {
    atExit(teardownLive);
    live.add(st);
  }
  const started = Date.now();
  let cp: ControlPlane | undefined;
  let ha: HaControlPlane | undefined;
  try {
    log('images');
    const images = await ensureImages();
    const golden = await goldenRoot(images);
    log('network: switch and node namespaces');
    const bed = await createTestBed({
      nodes: [...names, ...(opts.clients ?? [])],
      hostLink: true,
      detached: Boolean(opts.detached),
    });
    const kubeNodes = bed.nodes.filter((n) => names.includes(n.name));
    st.netns.push(bed.switchNs, ...bed.nodes.map((n) => n.ns));
    // The host link's root-namespace end is named after the bed; deleting it removes the pair.
    st.hostIf = `${bed.id}h`.slice(-15);
    save();
    const hostIP = bed.hostIPv4 as string;

    log('control plane');
    const users = [
      ...names.map((n) => ({ name: `system:node:${n}`, groups: ['system:nodes'] })),
      { name: 'system:kube-proxy' },
      { name: 'system:kube-controller-manager' },
      { name: 'system:kube-scheduler' },
    ];
    st.cpDir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'drainguard-cp-'));
    save();
    if (haCount > 1) {
      ha = await startHaControlPlane({
        nodes: kubeNodes.filter((n) => cpNames.includes(n.name)),
        users,
        dir: st.cpDir,
        sanIPs: [hostIP],
        // The last address of the lab pool (pool.ts): the speakers' VIPs come from its start.
        apiVip: bed.addr4(LAB_POOL_HOSTS[1]),
        onPid: (pid) => {
          st.pids.push(pid);
          save();
        },
      });
      cp = ha;
    } else {
      cp = await startControlPlane({
        bindAddress: hostIP,
        sanIPs: [hostIP],
        cluster: true,
        users,
        dir: st.cpDir,
        detached: Boolean(opts.detached),
        // LAB_AUDIT=1: every request in <cp dir>/audit.log (who, verb, URI, code, stage times).
        auditLog: process.env.LAB_AUDIT === '1',
      });
      st.pids.push(cp.etcdPid, cp.apiserverPid);
    }
    save();
    const haPlane = ha;
    const controlPlane = cp;
    const caFile = join(cp.dir, 'ca.crt');
    const spawnLogged = (name: string, cmd: string[]): ChildProcess => {
      const fd = openSync(join(dir, `${name}.log`), 'a');
      const [bin, ...args] = cmd as [string, ...string[]];
      const child = spawn(bin, args, { stdio: ['ignore', fd, fd], detached: true });
      child.unref();
      if (child.pid) st.pids.push(child.pid);
      save();
      return child;
    };
    const block = await pickPodBlock();
    const clusterCIDR = `198.18.${block}.0/21`;
    const controllerManager = (kubeconfig: string, leaderElect: boolean) => [
      join(bins, 'kube-controller-manager'),
      '--kubeconfig',
      kubeconfig,
      '--service-account-private-key-file',
      join(controlPlane.dir, 'sa.key'),
      '--root-ca-file',
      caFile,
      '--use-service-account-credentials',
      `--leader-elect=${leaderElect}`,
      '--secure-port=0',
      '--cluster-cidr',
      clusterCIDR,
      // Faster than the defaults (40 s, 5 m): a lab node that stops reporting is noticed in seconds.
      '--node-monitor-period=2s',
      '--node-monitor-grace-period=16s',
      '--v=1',
    ];
    const scheduler = (kubeconfig: string, leaderElect: boolean) => [
      join(bins, 'kube-scheduler'),
      '--kubeconfig',
      kubeconfig,
      `--leader-elect=${leaderElect}`,
      '--secure-port=0',
      '--v=1',
    ];
    if (haPlane) {
      // One of each per control-plane node against its own API server, electing a leader among them.
      for (const m of haPlane.members) {
        const enter = ['nsenter', `--net=/run/netns/${m.node.ns}`];
        spawnLogged(`kube-controller-manager-${m.name}`, [
          ...enter,
          ...controllerManager(haPlane.localKubeconfig('system:kube-controller-manager'), true),
        ]);
        spawnLogged(`kube-scheduler-${m.name}`, [
          ...enter,
          ...scheduler(haPlane.localKubeconfig('system:kube-scheduler'), true),
        ]);
      }
    } else {
      spawnLogged(
        'kube-controller-manager',
        controllerManager(cp.userKubeconfig('system:kube-controller-manager'), false),
      );
      spawnLogged('kube-scheduler', scheduler(cp.userKubeconfig('system:kube-scheduler'), false));
    }

    log('nodes');
    const nodes = await Promise.all(
      kubeNodes.map(async (n, i) => {
        const podCIDR = `198.18.${block + i + 1}.0/24`;
        // The API server (root namespace) dials webhooks at their pods: route each pod subnet to its node.
        const route = [podCIDR, 'via', n.ipv4];
        await sh(['ip', 'route', 'replace', ...route]);
        st.routes.push(route);
        // Nodes reach each other's pods directly, and ClusterIPs resolve on-link (kube-proxy DNATs
        // them in this namespace; anything it does not know goes nowhere).
        for (const [j, m] of kubeNodes.entries())
          if (j !== i) await n.run(['ip', 'route', 'replace', `198.18.${block + j + 1}.0/24`, 'via', m.ipv4]);
        await n.run(['ip', 'route', 'replace', SERVICE_CIDR, 'dev', 'eth0']);
        const cgroupRoot = `dglab-${id}-${n.name}`;
        st.cgroups.push(...makeCgroupRoot(cgroupRoot));
        save();
        const nodeDir = join(dir, n.name);
        mkdirSync(nodeDir, { recursive: true });
        // A control-plane node's kubelet and kube-proxy use its own API server (127.0.0.1:6443).
        const kubeconfigOf = (user: string) =>
          haPlane && cpNames.includes(n.name)
            ? haPlane.localKubeconfig(user)
            : controlPlane.userKubeconfig(user);
        return startNode({
          node: n,
          dir: nodeDir,
          podCIDR,
          clusterCIDR,
          cgroupRoot,
          binDir: bins,
          caFile,
          kubeletKubeconfig: kubeconfigOf(`system:node:${n.name}`),
          proxyKubeconfig: kubeconfigOf('system:kube-proxy'),
          goldenRoot: golden,
          onPid: (pid) => {
            st.pids.push(pid);
            save();
          },
        });
      }),
    );
    const kubectl: Cluster['kubectl'] = (args, o) => controlPlane.kubectl(args, o);
    const k: Cluster['k'] = async (args, o) => {
      const r = await kubectl(args, o);
      if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr.trim()}`);
      return r.stdout;
    };
    const controlPlaneLogs = (): Record<string, string> =>
      haPlane
        ? Object.assign(
            {},
            ...haPlane.members.map((m) => ({
              [`${m.name}/etcd`]: join(controlPlane.dir, `etcd-${m.name}.log`),
              [`${m.name}/kube-apiserver`]: join(controlPlane.dir, `apiserver-${m.name}.log`),
              [`${m.name}/kube-controller-manager`]: join(dir, `kube-controller-manager-${m.name}.log`),
              [`${m.name}/kube-scheduler`]: join(dir, `kube-scheduler-${m.name}.log`),
            })),
          )
        : {
            etcd: join(controlPlane.dir, 'etcd.log'),
            'kube-apiserver': join(controlPlane.dir, 'apiserver.log'),
            'kube-controller-manager': join(dir, 'kube-controller-manager.log'),
            'kube-scheduler': join(dir, 'kube-scheduler.log'),
          };
    const logFiles = (): Record<string, string> => ({
      ...controlPlaneLogs(),
      ...Object.assign({}, ...nodes.map((n) => n.logFiles())),
    });
    const cluster: Cluster = {
      dir,
      kubeconfigPath: cp.kubeconfigPath,
      server: cp.server,
      cp,
      ha: haPlane,
      bed,
      nodes,
      node(name) {
        const n = nodes.find((x) => x.name === name);
        if (!n) throw new Error(`no node ${name}; nodes are ${names.join(', ')}`);
        return n;
      },
      client: () => controlPlane.client(),
      kubectl,
      k,
      controlPlaneLogs,
      logs(tailBytes = 4000) {
        return Object.entries(logFiles())
          .map(([name, p]) => {
            let text = '';
            try {
              text = readFileSync(p, 'utf8').slice(-tailBytes);
            } catch {
              text = '(no log)';
            }
            // A Go panic's goroutine dump buries its cause: show fatal and panic lines first.
            let all = '';
            try {
              all = readFileSync(p, 'utf8');
            } catch {}
            const fatal = all
              .split('\n')
              .filter((l) => /^(F\d{4}|panic:|fatal error:)/.test(l))
              .slice(0, 5)
              .join('\n');
            return `--- ${name} (${p})\n${fatal ? `${fatal}\n...\n` : ''}${text}`;
          })
          .join('\n');
      },
      async stop() {
        live.delete(st);
        await controlPlane.stop();
        teardownCluster(st);
      },
    };
    log('node processes started; waiting for nodes Ready');
    try {
      await waitFor(
        `nodes ${names.join(', ')} Ready`,
        async () => {
          const r = await kubectl(['get', 'nodes', '-o', 'json']);
          if (r.code !== 0) return false;
          const items = (
            JSON.parse(r.stdout) as {
              items: {
                metadata: { name: string };
                status?: { conditions?: { type: string; status: string }[] };
              }[];
            }
          ).items;
          return names.every((n) =>
            items.some(
              (i) =>
                i.metadata.name === n &&
                i.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
            ),
          );
        },
        { timeoutMs: 120_000, intervalMs: 250 },
      );
      log('nodes Ready');
      // As RKE2 labels its servers (a kubelet may not set node-role labels on itself).
      if (cpNames.length > 0)
        await k([
          'label',
          'node',
          ...cpNames,
          'node-role.kubernetes.io/control-plane=true',
          'node-role.kubernetes.io/master=true',
          'node-role.kubernetes.io/etcd=true',
        ]);
      // Pods need their service account, which kube-controller-manager creates in every namespace;
      // the kubelet asks for each pod's token itself (TokenRequest: no token Secret since 1.24).
      await waitFor(
        'default service account',
        async () => (await kubectl(['get', 'serviceaccount', 'default', '-n', 'default'])).code === 0,
        { timeoutMs: 60_000, intervalMs: 250 },
      );
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${cluster.logs(2500)}`);
    }
    log(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return cluster;
  } catch (e) {
    live.delete(st);
    await cp?.stop().catch(() => {});
    teardownCluster(st);
    throw e;
  }
}

/** `make cluster-down`: stops a detached cluster from its state file. */
export function stopClusterFromState(dir: string): ClusterState | undefined {
  const file = join(dir, 'cluster.json');
  if (!existsSync(file)) return undefined;
  const st = JSON.parse(readFileSync(file, 'utf8')) as ClusterState;
  teardownCluster(st);
  return st;
}
