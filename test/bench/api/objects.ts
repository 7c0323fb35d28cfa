// The objects of make bench-api: Nodes of realistic size (~13 KiB as the API server returns them,
// like a kubeadm node with a CNI and a few dozen cached images), and one pod per sidecar, made
// by the webhook's own planner (the sidecar container and its environment exactly as injected),
// with a Running status as a kubelet would publish it.
import { createHash } from 'node:crypto';
import { KUBERNETES_VERSION } from '../../../lab/versions.ts';
import type { EnvVar } from '../../../shared/contract-env.ts';
import type { KubeObject } from '../../../shared/kube/types.ts';
import { plan } from '../../../webhook/plan/index.ts';
import { applyPatch, type PatchOp } from '../../../webhook/plan/json-patch.ts';

/** The profiles measured, each with the pod a cluster would run it in. */
export const BENCH_PROFILES = ['metallb-speaker', 'skupper-router', 'netfilter-cleanup'] as const;
export type BenchProfile = (typeof BENCH_PROFILES)[number];

export const NAMESPACES: Record<BenchProfile, string> = {
  'metallb-speaker': 'metallb-system',
  'skupper-router': 'skupper',
  'netfilter-cleanup': 'node-cleanup',
};
/** Namespace of the pods whose status the churn changes (on nodes without a sidecar). */
export const WORKLOAD_NS = 'workload';

const digest = (s: string) => createHash('sha256').update(s).digest('hex');

/** A Node as a kubeadm cluster's kubelet registers and reports it; ~13 KiB with managedFields. */
export function realisticNode(name: string, index: number): KubeObject & Record<string, unknown> {
  const ip = `10.${(index >> 16) & 255}.${(index >> 8) & 255}.${index & 255}`;
  const images = Array.from({ length: 40 }, (_, i) => {
    const repo = `registry.example.com/team-${i % 7}/service-${i}`;
    return {
      names: [`${repo}@sha256:${digest(`${repo}${i}`)}`, `${repo}:v1.${i}.${i % 5}`],
      sizeBytes: 20_000_000 + i * 1_234_567,
    };
  });
  const condition = (type: string, status: string, reason: string, message: string) => ({
    type,
    status,
    lastHeartbeatTime: '2024-01-01T00:00:00Z',
    lastTransitionTime: '2024-01-01T00:00:00Z',
    reason,
    message,
  });
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: {
        'beta.kubernetes.io/arch': 'amd64',
        'beta.kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'node.kubernetes.io/instance-type': 'bare-metal-64c-256g',
        'topology.kubernetes.io/region': 'dc-1',
        'topology.kubernetes.io/zone': `dc-1-rack-${index % 40}`,
        'node-role.kubernetes.io/worker': '',
        'example.com/pool': `pool-${index % 5}`,
      },
      annotations: {
        'kubeadm.alpha.kubernetes.io/cri-socket': '/run/containerd/containerd.sock',
        'node.alpha.kubernetes.io/ttl': '0',
        'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
        'projectcalico.org/IPv4Address': `${ip}/16`,
        'projectcalico.org/IPv4IPIPTunnelAddr': `192.168.${index & 255}.0`,
        'csi.volume.kubernetes.io/nodeid': JSON.stringify({ 'csi.example.com': name }),
      },
    },
    spec: {
      podCIDR: `192.168.${index & 255}.0/24`,
      podCIDRs: [`192.168.${index & 255}.0/24`],
      providerID: `baremetal://dc-1/${name}`,
    },
    status: {
      capacity: {
        cpu: '64',
        'ephemeral-storage': '959786032Ki',
        'hugepages-1Gi': '0',
        'hugepages-2Mi': '0',
        memory: '263856100Ki',
        pods: '110',
      },
      allocatable: {
        cpu: '63500m',
        'ephemeral-storage': '884538805627',
        'hugepages-1Gi': '0',
        'hugepages-2Mi': '0',
        memory: '262704100Ki',
        pods: '110',
      },
      conditions: [
        condition('NetworkUnavailable', 'False', 'CalicoIsUp', 'Calico is running on this node'),
        condition(
          'MemoryPressure',
          'False',
          'KubeletHasSufficientMemory',
          'kubelet has sufficient memory available',
        ),
        condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
        condition('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
        condition('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status. AppArmor enabled'),
      ],
      addresses: [
        { type: 'InternalIP', address: ip },
        { type: 'Hostname', address: name },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        machineID: digest(`m${name}`).slice(0, 32),
        systemUUID: digest(`u${name}`).slice(0, 32),
        bootID: digest(`b${name}`).slice(0, 32),
        kernelVersion: '5.15.0-91-generic',
        osImage: 'Ubuntu 22.04.3 LTS',
        containerRuntimeVersion: 'containerd://1.6.26',
        kubeletVersion: `v${KUBERNETES_VERSION}`,
        kubeProxyVersion: `v${KUBERNETES_VERSION}`,
        operatingSystem: 'linux',
        architecture: 'amd64',
      },
      images,
    },
  };
}

/** The pod each profile's sidecar is injected into (the workload's own containers). */
function workloadPod(profile: BenchProfile, name: string, nodeName: string): Record<string, unknown> {
  const pod = (meta: Record<string, unknown>, containers: unknown[], hostNetwork = false) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NAMESPACES[profile], ...meta },
    spec: {
      nodeName,
      serviceAccountName: 'default',
      containers,
      tolerations: [{ operator: 'Exists' }],
      ...(hostNetwork ? { hostNetwork } : {}),
    },
  });
  if (profile === 'metallb-speaker') {
    const speaker = {
      name: 'speaker',
      image: 'quay.io/metallb/speaker:v0.14.8',
      args: ['--port=7472', '--log-level=info'],
      ports: [
        { name: 'monitoring', containerPort: 7472 },
        { name: 'memberlist-tcp', containerPort: 7946, protocol: 'TCP' },
        { name: 'memberlist-udp', containerPort: 7946, protocol: 'UDP' },
      ],
    };
    return pod({ labels: { app: 'metallb', component: 'speaker' } }, [speaker], true);
  }
  if (profile === 'skupper-router')
    return pod({ labels: { 'skupper.io/component': 'router' } }, [
      { name: 'router', image: 'quay.io/skupper/skupper-router:2.7.1' },
      { name: 'kube-adaptor', image: 'quay.io/skupper/kube-adaptor:2.0.0' },
    ]);
  return pod(
    { labels: { app: 'azure-cni-cleanup' }, annotations: { 'drainguard.io/netfilter-cleanup': 'true' } },
    [{ name: 'pause', image: 'registry.k8s.io/pause:3.9' }],
    true,
  );
}

export interface InjectedPod {
  /** The pod as the API server would store it after the webhook's patch. */
  pod: Record<string, unknown>;
  /** The injected container's command (node, its flags, the bundle, `sidecar`). */
  command: string[];
  /** Its environment as the kubelet resolves it (downward API filled in from `view`). */
  env: (view: { uid: string; podIPs: string[] }) => Record<string, string>;
  memoryLimit: string;
}

/** Runs the webhook's planner on the workload's pod: what the sidecar gets is what it would get. */
export function injectedPod(profile: BenchProfile, name: string, nodeName: string): InjectedPod {
  const pod = workloadPod(profile, name, nodeName);
  const meta = pod.metadata as { namespace: string };
  const p = plan(
    { operation: 'CREATE', kind: { kind: 'Pod' }, namespace: meta.namespace, object: pod },
    { image: 'drainguard:bench', mode: 'auto', version: 'bench' },
  );
  if (!p.allowed || p.patch.length === 0)
    throw new Error(`the planner did not inject ${profile}: ${p.allowed ? p.outcome : p.message}`);
  const patched = applyOps(pod, p.patch);
  const spec = patched.spec as { containers: Container[]; initContainers?: Container[] };
  const sidecar = [...spec.containers, ...(spec.initContainers ?? [])].find((c) => c.name === 'drainguard');
  if (!sidecar) throw new Error(`no drainguard container in the injected ${profile} pod`);
  const fields = (view: { uid: string; podIPs: string[] }): Record<string, string> => ({
    'metadata.name': name,
    'metadata.namespace': meta.namespace,
    'metadata.uid': view.uid,
    'spec.nodeName': nodeName,
    'status.podIPs': view.podIPs.join(','),
    // hostNetwork: the pod's IP is the node's.
    'status.hostIP': view.podIPs[0] ?? '',
  });
  return {
    pod: patched,
    command: sidecar.command ?? [],
    memoryLimit: sidecar.resources?.limits?.memory ?? '',
    env: (view) => {
      const f = fields(view);
      const out: Record<string, string> = {};
      for (const e of sidecar.env ?? []) {
        const path = e.valueFrom?.fieldRef.fieldPath;
        out[e.name] = path === undefined ? (e.value ?? '') : (f[path] ?? '');
      }
      // No /metrics listener on the node's IP: the bed has no such address, and many sidecars
      // share one process here (what is measured is their API traffic).
      if (out.DRAINGUARD_METRICS_PORT !== undefined) out.DRAINGUARD_METRICS_PORT = '0';
      return out;
    },
  };
}

interface Container {
  name: string;
  command?: string[];
  env?: EnvVar[];
  resources?: { limits?: { memory?: string } };
}

const applyOps = (pod: Record<string, unknown>, ops: PatchOp[]) =>
  applyPatch(structuredClone(pod), ops) as Record<string, unknown>;

/** A Running, Ready status for a pod's containers, as its kubelet would publish it. */
export function runningStatus(pod: Record<string, unknown>, podIP: string): Record<string, unknown> {
  const spec = pod.spec as { containers: { name: string; image: string }[] };
  const t = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  return {
    phase: 'Running',
    hostIP: podIP,
    podIP,
    podIPs: [{ ip: podIP }],
    startTime: t,
    conditions: ['Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map((type) => ({
      type,
      status: 'True',
      lastTransitionTime: t,
    })),
    containerStatuses: spec.containers.map((c) => ({
      name: c.name,
      image: c.image,
      imageID: `${c.image}@sha256:${digest(c.image)}`,
      containerID: `containerd://${digest(`${c.name}${podIP}`)}`,
      ready: true,
      started: true,
      restartCount: 0,
      state: { running: { startedAt: t } },
    })),
  };
}
