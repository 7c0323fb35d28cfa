// One Kubernetes node of the lab cluster: a network namespace on the test switch running its own
// containerd, kubelet and kube-proxy, with a CNI bridge for its pods. The three run in the node's
// network namespace and in one mount namespace of the node's own (slave of the root's, so the
// kubelet's volume mounts are seen by containerd and runc, which share it). In it, the node has
// its own /var/log/pods, /var/log/containers and /run/netns, as a real node does: kubelet 1.20
// hard-codes /var/log/pods, and its container GC deletes every pod log directory there that is not
// one of its own pods' — with one shared directory the three kubelets deleted each other's logs.
import { type ChildProcess, spawn } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { waitFor } from '../../shared/clock.ts';
import type { TestNode } from '../bed/netns.ts';
import { sh } from '../bed/proc.ts';
import { containerdBinDir, containerdEnv, kubernetesBinDir } from '../versions.ts';
import { cloneRoot } from './images.ts';

/** The pause image scripts/build-images.sh builds from the Kubernetes module's pause.c, at its tag. */
export const pauseImage = () =>
  `registry.k8s.io/pause:${readFileSync(join(kubernetesBinDir(), 'pause.tag'), 'utf8').trim()}`;

export interface NodeSpec {
  node: TestNode;
  /** This node's state directory (containerd root/state, kubelet root, CNI config, logs). */
  dir: string;
  /** The pod subnet of this node's CNI bridge, e.g. 198.18.1.0/24. */
  podCIDR: string;
  /** All pods' subnets together (kube-proxy's --cluster-cidr). */
  clusterCIDR: string;
  /** The v1 cgroup (relative to each hierarchy's root) this node's pods live under. */
  cgroupRoot: string;
  binDir: string;
  caFile: string;
  kubeletKubeconfig: string;
  proxyKubeconfig: string;
  /** A containerd root holding the lab images (see images.ts), cloned as this node's root. */
  goldenRoot: string;
  /** Called with every pid this node starts, before it is awaited (for teardown by pid). */
  onPid(pid: number): void;
}

export interface LabNode {
  name: string;
  netns: TestNode;
  dir: string;
  podCIDR: string;
  containerdSock: string;
  /** `ctr` against this node's containerd, k8s.io namespace. */
  ctr(args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
  logFiles(): Record<string, string>;
}

/** Enters the node: its network namespace and its mount namespace (see makeMountNamespace). */
const nsenter = (spec: NodeSpec) => [
  'nsenter',
  `--mount=${mountNsFile(spec.dir)}`,
  `--net=/run/netns/${spec.node.ns}`,
];

const mountNsFile = (dir: string) => join(dir, 'mnt', 'ns');

/**
 * A mount namespace for the node, kept alive by a bind mount of it on <dir>/mnt/ns (the mount
 * holding it must be private), with the node's own log and netns directories mounted over the
 * machine's. It disappears with its mounts when the node's processes are gone and the file is
 * unmounted (teardown unmounts everything under the cluster's directory).
 */
async function makeMountNamespace(dir: string): Promise<void> {
  const holder = join(dir, 'mnt');
  mkdirSync(holder, { recursive: true });
  const must = async (cmd: string[]) => {
    const r = await sh(cmd);
    if (r.code !== 0) throw new Error(`${cmd.join(' ')}: ${r.stderr.trim()}`);
  };
  await must(['mount', '--bind', holder, holder]);
  await must(['mount', '--make-private', holder]);
  writeFileSync(mountNsFile(dir), '');
  await must(['unshare', `--mount=${mountNsFile(dir)}`, '--propagation', 'slave', 'true']);
  for (const [own, shared] of [
    ['pod-logs', '/var/log/pods'],
    ['container-logs', '/var/log/containers'],
    ['netns', '/run/netns'],
  ] as const) {
    mkdirSync(join(dir, own), { recursive: true });
    mkdirSync(shared, { recursive: true });
    await must(['nsenter', `--mount=${mountNsFile(dir)}`, 'mount', '--bind', join(dir, own), shared]);
  }
}

/** A crashed process is started again at most this many times (systemd's Restart= on a node). */
const CRASH_RESTARTS = 2;

function startLogged(spec: NodeSpec, name: string, cmd: string[], restarts = 0): ChildProcess {
  const log = join(spec.dir, `${name}.log`);
  const fd = openSync(log, 'a');
  const [bin, ...args] = [...nsenter(spec), ...cmd] as [string, ...string[]];
  // Own process group, not tied to this process's stdio: teardown stops them by pid.
  // containerd finds its shim on PATH: the lab's build first.
  const child = spawn(bin, args, { stdio: ['ignore', fd, fd], detached: true, env: containerdEnv() });
  child.unref();
  if (child.pid) spec.onPid(child.pid);
  // A real node runs its kubelet under systemd with Restart=always: one that exits on its own (a
  // Go runtime fatal error was seen once under load, leaving a node never Ready) is started again.
  // Stopped by a signal (teardown, a test's restart), it is not.
  if (name === 'kubelet')
    child.on('exit', (code, signal) => {
      if (signal !== null || code === 0 || restarts >= CRASH_RESTARTS) return;
      appendFileSync(log, `\n--- lab: ${name} exited with code ${code}; started again ---\n`);
      startLogged(spec, name, cmd, restarts + 1);
    });
  return child;
}

function containerdConfig(dir: string): string {
  return `version = 3
root = "${dir}/containerd/root"
state = "${dir}/containerd/state"
# Plugins that need kernel features or paths this machine does not have, or that would write outside
# the node's directory (NRI's socket is one machine-wide path: the nodes' containerds would share it).
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs", "io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp", "io.containerd.nri.v1.nri"]
[grpc]
  address = "${dir}/containerd.sock"
[ttrpc]
  address = "${dir}/containerd.sock.ttrpc"
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "${pauseImage()}"
  [plugins.'io.containerd.cri.v1.runtime']
    # root here lacks CAP_SYS_RESOURCE, and the kubelet asks for oom_score_adj -998 on every sandbox:
    # runc would die ("can't get final child's PID from pipe: EOF"). This clamps requests to no
    # lower than containerd's own score, which the kernel allows.
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          # runc's state per node, not the machine-wide /run/containerd/runc.
          Root = "${dir}/runc"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "${dir}/cni/net.d"
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`;
}

function cniConfig(spec: NodeSpec): string {
  return JSON.stringify(
    {
      cniVersion: '0.4.0',
      name: 'lab',
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          // Pods reach the API server (outside the pod range) masqueraded as the node, as on a
          // real node's uplink.
          ipMasq: true,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: spec.podCIDR }]],
            routes: [{ dst: '0.0.0.0/0' }],
            // Per node: the default /var/lib/cni/networks would be shared by all nodes' pods.
            dataDir: join(spec.dir, 'cni', 'ipam'),
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

function kubeletConfig(spec: NodeSpec): string {
  return JSON.stringify(
    {
      kind: 'KubeletConfiguration',
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      address: spec.node.ipv4,
      port: 10250,
      readOnlyPort: 0,
      healthzBindAddress: '127.0.0.1',
      healthzPort: 10248,
      // Only the API server (its client certificate is signed by the cluster CA) may call the
      // kubelet; it needs no token reviews for that.
      authentication: {
        anonymous: { enabled: false },
        webhook: { enabled: false },
        x509: { clientCAFile: spec.caFile },
      },
      authorization: { mode: 'AlwaysAllow' },
      cgroupDriver: 'cgroupfs',
      cgroupRoot: `/${spec.cgroupRoot}`,
      cgroupsPerQOS: true,
      enforceNodeAllocatable: [],
      failSwapOn: false,
      // Images are imported, never pulled: the image GC must never delete one, and the shared
      // disk's fill level must not evict the lab's pods.
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      evictionHard: {
        'memory.available': '50Mi',
        'nodefs.available': '0%',
        'imagefs.available': '0%',
        'nodefs.inodesFree': '0%',
      },
      serializeImagePulls: false,
      clusterDomain: 'cluster.local',
      resolvConf: '/etc/resolv.conf',
      makeIPTablesUtilChains: true,
      hairpinMode: 'hairpin-veth',
      maxPods: 60,
      nodeStatusUpdateFrequency: '4s',
      nodeStatusReportFrequency: '20s',
      syncFrequency: '10s',
      runtimeRequestTimeout: '2m',
      containerRuntimeEndpoint: `unix://${join(spec.dir, 'containerd.sock')}`,
      // This machine has cgroup v1 hierarchies only (no unified one to move to); Kubernetes 1.35+
      // refuses them unless told otherwise, and containerd 2 supports them until 2029.
      failCgroupV1: false,
    },
    null,
    2,
  );
}

/** Creates the node's cgroup root in every v1 hierarchy (kubelet requires it to exist). */
export function makeCgroupRoot(root: string): string[] {
  const made: string[] = [];
  // Every mounted v1 hierarchy (cpu and cpuacct may be one, or two): the kubelet checks them all.
  for (const ctrl of readdirSync('/sys/fs/cgroup')) {
    if (ctrl === 'unified') continue;
    const base = `/sys/fs/cgroup/${ctrl}`;
    let exists = true;
    try {
      readFileSync(join(base, 'cgroup.procs'));
    } catch {
      exists = false;
    }
    if (!exists) continue;
    const dir = join(base, root);
    mkdirSync(dir, { recursive: true });
    made.push(dir);
    // A node's pods share CPU with the host's busy processes (the test runner, the other lane, the
    // control plane) at the weight of two of them, as a node's own two cores would give them, not
    // of one process each: a handover's timing is the product's, not the runner's.
    if (existsSync(join(dir, 'cpu.shares'))) writeFileSync(join(dir, 'cpu.shares'), '2048');
    if (ctrl === 'cpuset') {
      // A new cpuset starts with no CPUs and no memory nodes: copy the parent's.
      for (const f of ['cpuset.cpus', 'cpuset.mems'])
        writeFileSync(join(dir, f), readFileSync(join(base, f), 'utf8').trim() || '0');
    }
  }
  return made;
}

export async function startNode(spec: NodeSpec): Promise<LabNode> {
  const { node, dir } = spec;
  await makeMountNamespace(dir);
  mkdirSync(join(dir, 'containerd'), { recursive: true });
  await cloneRoot(spec.goldenRoot, join(dir, 'containerd', 'root'));
  for (const d of ['containerd/root', 'containerd/state', 'runc', 'cni/net.d', 'cni/ipam', 'kubelet/pki'])
    mkdirSync(join(dir, d), { recursive: true });
  writeFileSync(join(dir, 'containerd.toml'), containerdConfig(dir));
  writeFileSync(join(dir, 'cni', 'net.d', '10-lab.conflist'), cniConfig(spec));
  writeFileSync(join(dir, 'kubelet.json'), kubeletConfig(spec));
  // Routing as on a node: forwarding for its pods, and the API server's address on the uplink.
  await node.run(['sysctl', '-qw', 'net.ipv4.ip_forward=1']);

  const sock = join(dir, 'containerd.sock');
  startLogged(spec, 'containerd', [
    join(containerdBinDir(), 'containerd'),
    '--config',
    join(dir, 'containerd.toml'),
  ]);
  const ctr = (args: string[]) =>
    sh([join(containerdBinDir(), 'ctr'), '--address', sock, '--namespace', 'k8s.io', ...args], {
      timeoutMs: 300_000,
    });
  await waitFor(`${node.name}: containerd answers`, async () => (await ctr(['version'])).code === 0, {
    timeoutMs: 30_000,
    intervalMs: 100,
  });

  startLogged(spec, 'kubelet', [
    join(spec.binDir, 'kubelet'),
    '--config',
    join(dir, 'kubelet.json'),
    '--kubeconfig',
    spec.kubeletKubeconfig,
    '--node-ip',
    node.ipv4,
    '--hostname-override',
    node.name,
    '--root-dir',
    join(dir, 'kubelet'),
    '--cert-dir',
    join(dir, 'kubelet', 'pki'),
    '--v',
    '1',
  ]);
  startLogged(spec, 'kube-proxy', [
    join(spec.binDir, 'kube-proxy'),
    '--kubeconfig',
    spec.proxyKubeconfig,
    '--hostname-override',
    node.name,
    '--bind-address',
    node.ipv4,
    '--proxy-mode',
    'iptables',
    '--cluster-cidr',
    spec.clusterCIDR,
    '--metrics-bind-address',
    '127.0.0.1:10249',
    '--healthz-bind-address',
    '127.0.0.1:10256',
    // The conntrack table is the machine's: kube-proxy must not resize it.
    '--conntrack-max-per-core',
    '0',
    '--conntrack-tcp-timeout-established',
    '0',
    '--conntrack-tcp-timeout-close-wait',
    '0',
    '--v',
    '1',
  ]);
  return {
    name: node.name,
    netns: node,
    dir,
    podCIDR: spec.podCIDR,
    containerdSock: sock,
    ctr,
    logFiles: () => ({
      [`${node.name}/containerd`]: join(dir, 'containerd.log'),
      [`${node.name}/kubelet`]: join(dir, 'kubelet.log'),
      [`${node.name}/kube-proxy`]: join(dir, 'kube-proxy.log'),
    }),
  };
}
