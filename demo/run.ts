// `make demo`: the whole system handling a drain on one machine. A real API server, three
// node namespaces and a client on one switch (the L2 test world), the webhook injecting the
// sidecar, MetalLB speaker and skupper router stand-ins, stale azure-vnet rules cleaned up,
// and a `kubectl drain` of the node that owns the VIP and holds the Lease — measured from the
// outside: ARP probes from the client namespace and reads of the API, never sidecar log lines.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildAzureNode } from '../lab/azure-layout.ts';
import { freePort } from '../lab/control-plane.ts';
import { createL2World, type L2World, METALLB_NS } from '../lab/l2-world.ts';
import { sh } from '../lab/netns.ts';
import { type ContainerHandle, KubeletStandIn } from '../lab/sim/kubelet.ts';
import { LeaseCandidate } from '../lab/sim/lease-candidate.ts';
import { webhookConfig } from '../lab/webhook-config.ts';
import { waitFor } from '../shared/clock.ts';
import { KubeClient } from '../shared/kube/client.ts';
import type { KubeList, KubeObject, Lease, Node, Pod } from '../shared/kube/types.ts';
import { EXCLUDE_LABEL, LABEL_OWNED_ANNOTATION, parseStatus, STATUS_ANNOTATION } from '../sidecar/l2/core.ts';
import { FENCE_TABLE } from '../sidecar/l2/fence.ts';
import { INJECT_LABEL, SIDECAR_NAME } from '../webhook/profiles.ts';
import { podDiff, summarize } from './diff.ts';
import { renderReport } from './report.ts';
import {
  type ArpSample,
  firstAnsweredBy,
  firstRenewBy,
  type Gap,
  type LeaseSample,
  lastAnsweredBy,
  longestArpSilence,
  summaryTable,
  type Timeline,
  type TimelineEvent,
} from './timeline.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const CLI = join(ROOT, 'cli/drainguard.ts');
const SITE_NS = 'skupper-site';
const LEASE = 'skupper-site-leader';
const MWC = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations';
/** Sampling: ARP round, Lease read and API read intervals (the report states them as resolution). */
const PROBE_MS = 50;
const LEASE_POLL_MS = 100;
const API_POLL_MS = 200;

const started = Date.now();
const clockText = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s`;
const say = (s: string) => process.stdout.write(`[${clockText()}] ${s}\n`);
/** A timeline line: time relative to the start of the drain. */
const tsay = (t: number, s: string) =>
  process.stdout.write(`  t=${t >= 0 ? '+' : '-'}${(Math.abs(t) / 1000).toFixed(2)}s  ${s}\n`);
const step = (n: number, s: string) => process.stdout.write(`\n== ${n}. ${s}\n`);

/** Root-namespace children (webhook): killed at exit, Ctrl-C included (the libs' exit hooks do the rest). */
const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children)
    try {
      if (c.exitCode === null) c.kill('SIGKILL');
    } catch {}
});

/** The sidecar's environment as the webhook injected it, with the downward-API values a kubelet fills in. */
function injectedEnv(pod: Pod): Record<string, string> {
  const c = (
    (pod.spec?.containers ?? []) as { name: string; env?: { name: string; value?: string }[] }[]
  ).find((x) => x.name === SIDECAR_NAME);
  if (!c)
    throw new Error(
      `pod ${pod.metadata?.name} has no ${SIDECAR_NAME} container: the webhook did not inject it`,
    );
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
  env.DRAINGUARD_POD_NAME = pod.metadata?.name ?? '';
  env.DRAINGUARD_POD_NAMESPACE = pod.metadata?.namespace ?? '';
  env.DRAINGUARD_POD_UID = pod.metadata?.uid ?? '';
  env.DRAINGUARD_NODE_NAME = pod.spec?.nodeName ?? '';
  return env;
}

async function startWebhook(w: L2World): Promise<void> {
  const client = w.client;
  await client.create('/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: 'drainguard-system' },
  });
  const port = await freePort();
  // The webhook fills in caBundle itself (self-managed TLS).
  await client.create(MWC, webhookConfig('drainguard', port, undefined));
  const proc = spawn(
    process.execPath,
    [
      CLI,
      'webhook',
      '--tls-self-managed',
      '--port',
      String(port),
      '--host',
      '127.0.0.1',
      '--tls-ip-san',
      '127.0.0.1',
      '--sidecar-image',
      'drainguard:demo',
      // The 1.20 API server drops native sidecars (restartPolicy on init containers).
      '--sidecar-mode',
      'classic',
      '--kubeconfig',
      w.cp.kubeconfigPath,
      '--log-level',
      'warn',
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  children.add(proc);
  await waitFor(
    'the webhook to patch its caBundle',
    async () => {
      if (proc.exitCode !== null) throw new Error(`drainguard webhook exited with ${proc.exitCode}`);
      const cfg = await client.get<KubeObject & { webhooks: { clientConfig: { caBundle?: string } }[] }>(
        `${MWC}/drainguard`,
      );
      return Boolean(cfg.webhooks[0]?.clientConfig.caBundle);
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
  // The caBundle is patched before the server listens: wait for the port too.
  await waitFor(
    'the webhook to listen',
    () =>
      new Promise<boolean>((resolve) => {
        const sock = connect(port, '127.0.0.1', () => {
          sock.destroy();
          resolve(true);
        });
        sock.on('error', () => resolve(false));
      }),
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  say(
    `drainguard webhook on https://127.0.0.1:${port} (self-managed CA, caBundle patched into its configuration)`,
  );
}

async function labelNamespace(w: L2World, ns: string): Promise<void> {
  await w.client.patch(
    `/api/v1/namespaces/${ns}`,
    { metadata: { labels: { [INJECT_LABEL]: 'enabled' } } },
    'merge',
  );
  say(`namespace ${ns} labelled ${INJECT_LABEL}=enabled`);
}

/** Replaces the world's speaker pods by plain MetalLB speaker pods that go through the webhook. */
async function speakerPods(w: L2World): Promise<Pod[]> {
  const client = w.client;
  const ds = await client.get<KubeObject>(`/apis/apps/v1/namespaces/${METALLB_NS}/daemonsets/speaker`);
  const out: Pod[] = [];
  for (const n of w.nodes) {
    const name = `speaker-${n.name}`;
    await client.delete(`/api/v1/namespaces/${METALLB_NS}/pods/${name}`, {
      query: { gracePeriodSeconds: 0 },
    });
    await waitFor(
      `${name} gone`,
      async () =>
        client.get(`/api/v1/namespaces/${METALLB_NS}/pods/${name}`).then(
          () => false,
          () => true,
        ),
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    const plain = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        namespace: METALLB_NS,
        labels: { app: 'metallb', component: 'speaker' },
        ownerReferences: [
          {
            apiVersion: 'apps/v1',
            kind: 'DaemonSet',
            name: 'speaker',
            uid: ds.metadata?.uid ?? '',
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: {
        nodeName: n.name,
        // As MetalLB ships it; the webhook injects the L2 profile into hostNetwork pods only.
        hostNetwork: true,
        terminationGracePeriodSeconds: 2,
        containers: [
          { name: 'speaker', image: 'quay.io/metallb/speaker:v0.14.9', ports: [{ containerPort: 7946 }] },
        ],
      },
    };
    const pod = await client.create<Pod>(`/api/v1/namespaces/${METALLB_NS}/pods`, plain);
    if (out.length === 0) showDiff(plain, pod);
    out.push(pod);
  }
  return out;
}

function showDiff(before: unknown, after: Pod): void {
  const volatile =
    /^(metadata\.(uid|resourceVersion|creationTimestamp|managedFields|selfLink)|status)|\.(terminationMessage\w*|imagePullPolicy)$|^spec\.(dnsPolicy|restartPolicy|schedulerName|securityContext|enableServiceLinks|preemptionPolicy|priority|tolerations)/;
  const lines = summarize(
    podDiff(before, after, (p) => volatile.test(p)),
    14,
  );
  say(
    `webhook injected ${after.metadata?.namespace}/${after.metadata?.name} (diff of what was sent vs. what was stored):`,
  );
  for (const l of lines) process.stdout.write(`          ${l}\n`);
}

interface Router {
  /** Epoch ms at which the leader container (kube-adaptor) had stopped. */
  leaderStoppedAt?: number;
  name: string;
  node: string;
  sim: LeaseCandidate;
  sidecar: ChildProcess;
}

async function startRouters(w: L2World, kubelet: KubeletStandIn, nodes: [string, string]): Promise<Router[]> {
  const client = w.client;
  await client.create('/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: SITE_NS },
  });
  await labelNamespace(w, SITE_NS);
  const routers: Router[] = [];
  for (const [i, node] of nodes.entries()) {
    const name = `skupper-router-${i + 1}`;
    const plain = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        namespace: SITE_NS,
        labels: { 'skupper.io/component': 'router', application: 'skupper-router' },
      },
      spec: {
        nodeName: node,
        containers: [
          { name: 'router', image: 'quay.io/skupper/skupper-router:3.3' },
          { name: 'kube-adaptor', image: 'quay.io/skupper/kube-adaptor:2.1' },
        ],
      },
    };
    const pod = await client.create<Pod>(`/api/v1/namespaces/${SITE_NS}/pods`, plain);
    if (i === 0) showDiff(plain, pod);
    // The leader container: client-go leader election with skupper's timings (15 s / 10 s / 2 s).
    const sim = new LeaseCandidate({
      client: new KubeClient(w.cp.target),
      namespace: SITE_NS,
      lease: LEASE,
      identity: name,
    });
    const env = injectedEnv(pod);
    const sidecar = w.bed.node(node).spawn([process.execPath, CLI, 'sidecar'], {
      stdio: ['ignore', 'ignore', 'ignore'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', KUBECONFIG: w.cp.kubeconfigPath, ...env },
    });
    const exited = new Promise<number>((r) => sidecar.once('exit', (c) => r(c ?? 137)));
    const router: Router = { name, node, sim, sidecar };
    const leader: ContainerHandle = {
      stop: async () => {
        await sim.stop();
        router.leaderStoppedAt = Date.now();
        return 0;
      },
    };
    const side: ContainerHandle = {
      stop: async () => {
        if (sidecar.exitCode === null) sidecar.kill('SIGTERM');
        return exited;
      },
      kill: () => {
        if (sidecar.exitCode === null) sidecar.kill('SIGKILL');
      },
    };
    await kubelet.run(SITE_NS, name, { 'kube-adaptor': leader, [SIDECAR_NAME]: side });
    routers.push(router);
    sim.start();
    if (i === 0) await waitFor(`${name} leading`, () => sim.leading, { timeoutMs: 30_000, intervalMs: 20 });
    say(
      `${name} on ${node}: sidecar started in the node namespace with the injected environment${i === 0 ? '; it leads' : ''}`,
    );
  }
  return routers;
}

async function natRuleCount(ns: { run(cmd: string[]): Promise<string> }): Promise<string[]> {
  return (await ns.run(['ebtables', '-t', 'nat', '-L']))
    .split('\n')
    .filter((l) => l.startsWith('-'))
    .map((l) => l.trim());
}

async function netfilterStep(events: string[]): Promise<void> {
  const l = await buildAzureNode();
  try {
    const before = await natRuleCount(l.node);
    const reusedIp = l.pods.find((p) => p.name === 'lxc-health')?.ips[0] ?? '';
    const ping = async () =>
      (await l.client.exec(['ping', '-c1', '-W1', reusedIp])).code === 0 ? 'answers' : 'does not answer';
    say(
      `node with azure-vnet leftovers: ${before.length} ebtables nat rules (${l.staleSpecs.length} stale for pod IPs no longer azure's), ${l.staleNeighbours.length} stale neighbours`,
    );
    say(`ping from the node's client to ${reusedIp} (IP reused by a pod of the new CNI): ${await ping()}`);
    const podsFile = join(tmpdir(), `drainguard-demo-pods-${process.pid}.json`);
    writeFileSync(
      podsFile,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'PodList',
        items: l.pods.map((p) => ({
          metadata: { name: p.name, namespace: p.namespace },
          spec: { nodeName: 'azure-node', ...(p.name === 'host-net' ? { hostNetwork: true } : {}) },
          status: { phase: 'Running', podIP: p.ips[0], podIPs: p.ips.map((ip) => ({ ip })) },
        })),
      }),
    );
    const r = await sh(
      [
        process.execPath,
        CLI,
        'netfilter-cleanup',
        '--once',
        '--pods-file',
        podsFile,
        '--node',
        'azure-node',
        '--netns',
        l.node.ns,
        '--confirm-seconds',
        '1',
      ],
      { timeoutMs: 60_000 },
    );
    if (r.code !== 0) throw new Error(`netfilter-cleanup failed: ${r.stderr}`);
    const removed = r.stdout.split('\n').filter((x) => x.startsWith('removed '));
    for (const x of removed) process.stdout.write(`          ${x.replace(/ {2}# .*/, '')}\n`);
    const after = await natRuleCount(l.node);
    const gone = before.filter((x) => !after.includes(x));
    const exact = gone.length === l.staleSpecs.length && after.length === before.length - l.staleSpecs.length;
    say(
      `cleanup removed ${gone.length} rules and ${removed.length - gone.length} neighbours; ${after.length} node-wide/live rules kept${exact ? ' — exactly the stale ones' : ' — MISMATCH with the layout'}`,
    );
    await waitFor('reused IP reachable', async () => (await ping()) === 'answers', {
      timeoutMs: 15_000,
      intervalMs: 200,
    }).catch(() => undefined);
    const now = await ping();
    say(`ping to ${reusedIp} after the cleanup: ${now}`);
    events.push(`netfilter: ${gone.length} stale rules removed, ${after.length} kept, reused IP ${now}`);
  } finally {
    await l.destroy();
  }
}

/**
 * The same two failures without drainguard, measured now on the same machine: a leader whose
 * container stops without handing over (skupper never releases), and a speaker that dies while it
 * announces (peers notice through memberlist failure detection).
 */
async function baselines(
  w: L2World,
  announcer: string,
): Promise<{ leaseMs: number | null; arpMs: number | null }> {
  const ns = 'skupper-site-baseline';
  await w.client.create('/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: ns },
  });
  const clients = [new KubeClient(w.cp.target), new KubeClient(w.cp.target)];
  const [a, b] = ['router-a', 'router-b'].map(
    (identity, i) =>
      new LeaseCandidate({ client: clients[i] as KubeClient, namespace: ns, lease: LEASE, identity }),
  ) as [LeaseCandidate, LeaseCandidate];
  const leaseRun = (async (): Promise<number | null> => {
    a.start();
    await waitFor('baseline leader', () => a.leading, { timeoutMs: 30_000, intervalMs: 20 });
    b.start();
    await new Promise((r) => setTimeout(r, 2500)); // b has seen the record at least once
    await a.stop();
    const stopped = Date.now();
    say(
      `baseline: leader container of router-a stopped without drainguard (Lease not released, as skupper does)`,
    );
    try {
      await waitFor(
        'router-b to take the Lease on its own',
        async () =>
          (await w.client.get<Lease>(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${LEASE}`)).spec
            ?.holderIdentity === 'router-b',
        { timeoutMs: 45_000, intervalMs: 100 },
      );
      const ms = Date.now() - stopped;
      say(`baseline: Lease read shows router-b after ${(ms / 1000).toFixed(1)} s`);
      return ms;
    } catch {
      return null;
    } finally {
      await b.stop();
      for (const c of clients) c.close();
    }
  })();
  const arpRun = (async (): Promise<number | null> => {
    const rounds: ArpSample[] = [];
    const mac = new Map(w.nodes.map((n) => [n.mac.toLowerCase(), n.name]));
    const probe = w.startProbe(PROBE_MS, (r) =>
      rounds.push({ t: r.t, nodes: r.macs.map((m) => mac.get(m.toLowerCase()) ?? m) }),
    );
    try {
      await waitFor('probe running', () => rounds.length > 5, { timeoutMs: 10_000 });
      const killed = Date.now();
      await w.stopSpeaker(announcer, 'SIGKILL');
      say(`baseline: speaker on ${announcer} killed while announcing, no drainguard involved`);
      await waitFor(
        'another speaker to answer',
        () => rounds.some((x) => x.t > killed && x.nodes.length > 0 && !x.nodes.includes(announcer)),
        { timeoutMs: 40_000, intervalMs: 50 },
      );
      const ms = longestArpSilence(rounds, killed - 1, rounds.at(-1)?.t ?? killed);
      say(`baseline: ${w.vip} unanswered for ${(ms / 1000).toFixed(1)} s until a peer took over`);
      return ms;
    } catch {
      return null;
    } finally {
      probe.kill('SIGKILL');
    }
  })();
  const [leaseMs, arpMs] = await Promise.all([leaseRun, arpRun]);
  return { leaseMs, arpMs };
}

interface Recorder {
  arp: ArpSample[];
  lease: LeaseSample[];
  events: TimelineEvent[];
  stop(): Promise<void>;
}

/** Probes and API readers, all timestamped on receipt relative to t0 (the drain). */
function record(w: L2World, t0: number, macToNode: Map<string, string>): Recorder {
  const arp: ArpSample[] = [];
  const lease: LeaseSample[] = [];
  const events: TimelineEvent[] = [];
  let lastArp = '?';
  const probe = w.startProbe(PROBE_MS, (r) => {
    const nodes = [...new Set(r.macs.map((m) => macToNode.get(m.toLowerCase()) ?? m))].sort();
    const t = r.t - t0;
    arp.push({ t, nodes });
    const v = nodes.join('+') || 'nobody';
    if (v !== lastArp) {
      tsay(t, `ARP probe from the client: ${w.vip} answered by ${v}`);
      lastArp = v;
    }
  });
  let running = true;
  const client = new KubeClient(w.cp.target);
  const seen = new Set<string>();
  const note = (key: string, source: string, text: string) => {
    if (seen.has(key)) return;
    seen.add(key);
    const t = Date.now() - t0;
    events.push({ t, source, text });
    tsay(t, `${source}: ${text}`);
  };
  const leaseLoop = (async () => {
    let last = '?';
    while (running) {
      try {
        const l = await client.get<Lease>(
          `/apis/coordination.k8s.io/v1/namespaces/${SITE_NS}/leases/${LEASE}`,
        );
        const holder = l.spec?.holderIdentity ?? '';
        const t = Date.now() - t0;
        lease.push({ t, holder, ...(l.spec?.renewTime ? { renewTime: l.spec.renewTime } : {}) });
        if (holder !== last) {
          tsay(
            t,
            `Lease ${SITE_NS}/${LEASE} read: holder ${holder || '(none)'}, renewed ${l.spec?.renewTime ?? '-'}`,
          );
          last = holder;
        }
      } catch {}
      await new Promise((r) => setTimeout(r, LEASE_POLL_MS));
    }
  })();
  const apiLoop = (async () => {
    while (running) {
      try {
        const nodes = await client.get<KubeList<Node>>('/api/v1/nodes');
        for (const n of nodes.items ?? []) {
          const name = n.metadata?.name ?? '';
          const ann = n.metadata?.annotations ?? {};
          if (n.spec?.unschedulable) note(`cordon ${name}`, `Node ${name}`, 'cordoned (spec.unschedulable)');
          if (n.metadata?.labels?.[EXCLUDE_LABEL] !== undefined)
            note(
              `label ${name}`,
              `Node ${name}`,
              `label ${EXCLUDE_LABEL} present${ann[LABEL_OWNED_ANNOTATION] === 'true' ? ' (added by drainguard)' : ''}`,
            );
          const st = parseStatus(ann[STATUS_ANNOTATION]);
          if (st)
            note(
              `phase ${name} ${st.phase}`,
              `Node ${name}`,
              `L2 handover phase ${st.phase}${st.fenced ? ` (fence: nft table ${FENCE_TABLE})` : ''}${Object.keys(st.handedTo).length ? `, handed to ${Object.values(st.handedTo).join(',')}` : ''}`,
            );
        }
        for (const s of await w.l2Statuses())
          note(`l2status ${s.node} ${s.service}`, 'ServiceL2Status', `${s.service} announced by ${s.node}`);
        for (const ns of [METALLB_NS, SITE_NS, 'default']) {
          const evs = await client.get<
            KubeList<
              KubeObject & {
                reason?: string;
                message?: string;
                source?: { component?: string };
                involvedObject?: { kind?: string; name?: string };
              }
            >
          >(`/api/v1/namespaces/${ns}/events`);
          for (const e of evs.items ?? [])
            if (/drainguard/.test(e.source?.component ?? ''))
              note(
                `event ${e.metadata?.uid}`,
                `Event ${e.reason} on ${e.involvedObject?.kind ?? '?'} ${e.involvedObject?.name ?? '?'}`,
                String(e.message ?? ''),
              );
        }
        const pods = await client.get<KubeList<Pod>>(`/api/v1/namespaces/${SITE_NS}/pods`);
        for (const p of pods.items ?? [])
          if (p.metadata?.deletionTimestamp)
            note(
              `deleting ${p.metadata.name}`,
              `Pod ${p.metadata.name}`,
              'being deleted (evicted by the drain)',
            );
      } catch {}
      await new Promise((r) => setTimeout(r, API_POLL_MS));
    }
  })();
  return {
    arp,
    lease,
    events,
    async stop() {
      running = false;
      probe.kill('SIGKILL');
      await Promise.all([leaseLoop, apiLoop]);
      client.close();
    },
  };
}

async function main(): Promise<number> {
  process.stdout.write('drainguard demo: a drain on one machine, measured from the outside\n');
  if (process.getuid?.() !== 0) {
    process.stderr.write('make demo needs root: it creates network namespaces, nft tables and raw sockets\n');
    return 2;
  }
  step(1, 'control plane and a three-node cluster of network namespaces with a client');
  // The world picks a free documentation /24 for the segment and puts the VIP on it (<segment>.100).
  const w = await createL2World();
  let kubelet: KubeletStandIn | undefined;
  const routers: Router[] = [];
  try {
    say(
      `kube-apiserver ${w.cp.server}; nodes ${w.nodes.map((n) => `${n.name} ${n.ipv4} ${n.mac}`).join(', ')}; client ${w.clientNode.ipv4}`,
    );
    say(`Service web/www type LoadBalancer, VIP ${w.vip}`);

    step(2, 'webhook with self-managed TLS, registered with the API server');
    await startWebhook(w);
    await labelNamespace(w, METALLB_NS);

    step(3, 'MetalLB speakers (one per node) and two skupper routers, injected by the webhook');
    const speakers = await speakerPods(w);
    const owner = w.initialOwner;
    const other = w.nodes.map((n) => n.name).find((n) => n !== owner) as string;
    kubelet = new KubeletStandIn(w.client, { pollMs: 50 });

    step(4, 'sidecars in the node namespaces, speaker and leader-election simulators, kubelet stand-in');
    for (const n of w.nodes) await w.startSpeaker(n.name);
    await waitFor(
      'the VIP to be announced',
      async () => (await w.l2Statuses()).some((s) => s.node === owner),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    // The webhook binds a hostNetwork sidecar to the node's loopback; the demo reads it from
    // outside the node's namespace, so it listens on the node's address too.
    for (const p of speakers)
      await w.startSidecar(p.spec?.nodeName ?? '', { ...injectedEnv(p), DRAINGUARD_BIND_ADDRESS: '0.0.0.0' });
    say(
      `speakers running; ${owner} announces ${w.vip}; L2 sidecars ready on ${w.nodes.map((n) => n.name).join(', ')}`,
    );
    routers.push(...(await startRouters(w, kubelet, [owner, other])));
    await waitFor(
      'router sidecars synced',
      async () => {
        for (const r of routers)
          if (r.sidecar.exitCode !== null)
            throw new Error(`sidecar of ${r.name} exited ${r.sidecar.exitCode}`);
        return true;
      },
      { timeoutMs: 5_000 },
    );

    step(5, 'stale azure-vnet rules for a reused pod IP, cleaned up by drainguard');
    const netfilterNotes: string[] = [];
    await netfilterStep(netfilterNotes);

    step(6, `kubectl drain ${owner} (owns the VIP, its router holds the Lease) — live timeline`);
    const macToNode = new Map(w.nodes.map((n) => [n.mac.toLowerCase(), n.name]));
    const t0 = Date.now() + 1500;
    const rec = record(w, t0, macToNode);
    await new Promise((r) => setTimeout(r, Math.max(0, t0 - Date.now())));
    tsay(0, `kubectl drain ${owner} --ignore-daemonsets --force`);
    const drainStart = Date.now();
    const drain = w.cp.kubectl([
      'drain',
      owner,
      '--ignore-daemonsets',
      '--force',
      '--delete-emptydir-data',
      '--timeout=90s',
    ]);
    let drainDone: number | undefined;
    void drain.then((r) => {
      drainDone = Date.now() - t0;
      tsay(
        drainDone,
        `kubectl drain finished (exit ${r.code})${r.code !== 0 ? `: ${r.stderr.trim().split('\n').pop()}` : ''}`,
      );
    });
    const newOwner = w.ownerAmong(w.nodes.map((n) => n.name).filter((n) => n !== owner));
    const successor = routers[1]?.name ?? '';
    await waitFor(
      'the handover to finish (drain done, successor renewing the Lease, VIP answered by the new owner only for 3 s)',
      () => {
        const since = rec.arp.filter((a) => a.t >= Date.now() - t0 - 3000);
        const arpMoved =
          since.length > 20 && since.every((a) => a.nodes.length === 1 && a.nodes[0] === newOwner);
        const leaseMoved =
          rec.lease.at(-1)?.holder === successor && firstRenewBy(rec.lease, successor, 0) !== null;
        return drainDone !== undefined && arpMoved && leaseMoved;
      },
      { timeoutMs: 75_000, intervalMs: 100 },
    ).catch((e: Error) => say(`not everything settled: ${e.message}`));
    await rec.stop();
    const endT = Date.now() - t0;

    const status = await sh([process.execPath, CLI, 'status', '--kubeconfig', w.cp.kubeconfigPath]);
    say(
      `drainguard status${status.code !== 0 ? ` failed: ${status.stderr.trim()}` : ' (what an operator sees now):'}`,
    );
    for (const l of status.stdout.trimEnd().split('\n')) process.stdout.write(`          ${l}\n`);

    step(7, 'baselines: the same failures without drainguard, measured now');
    const base = await baselines(w, newOwner);

    step(8, 'summary');
    const moved = firstAnsweredBy(rec.arp, newOwner, 0);
    const lastOld = lastAnsweredBy(rec.arp, owner, 0);
    const leaderExit = routers[0]?.leaderStoppedAt;
    const leaseAt = rec.lease.find((l) => l.t >= 0 && l.holder === successor)?.t ?? null;
    const exitT = leaderExit !== undefined ? leaderExit - t0 : null;
    // The successor's own client-go loop notices it is the holder at its next retry (2–4.4 s).
    const renewAt = firstRenewBy(rec.lease, successor, 0);
    const gaps: Gap[] = [
      {
        name: `VIP ${w.vip} unanswered (longest, from drain start)`,
        measuredMs: longestArpSilence(rec.arp, 0, endT),
        baselineMs: base.arpMs,
        baselineNote:
          'measured: announcing speaker killed, no drainguard; peers wait for failure detection (simulator 5 s; MetalLB 5–24 s)',
      },
      {
        name: `drain start → ${newOwner} answers ARP`,
        measuredMs: moved,
        baselineMs: null,
        baselineNote:
          'never while the speaker runs: DaemonSet pods survive drains, cordon is ignored (MetalLB ≥ 0.15)',
      },
      {
        name: `${owner} still answering after drain start`,
        measuredMs: lastOld,
        baselineMs: null,
        baselineNote: 'until the speaker process exits',
      },
      {
        name: `leader stopped → Lease names ${successor}`,
        measuredMs: exitT !== null && leaseAt !== null ? Math.max(0, leaseAt - exitT) : null,
        baselineMs: base.leaseMs,
        baselineNote:
          'measured: leader stopped, Lease left to expire (15 s duration + 2–4.4 s retry, skupper timings)',
      },
      {
        name: `leader stopped → ${successor} renews it (leading)`,
        measuredMs: exitT !== null && renewAt !== null ? Math.max(0, renewAt - exitT) : null,
        baselineMs: base.leaseMs,
        baselineNote: "same run as above: there the successor's own acquire is its first renew",
      },
    ];
    process.stdout.write(`${summaryTable(gaps)}\n`);
    if (drainStart > t0 + 500) say('note: the drain started late (machine busy)');
    const timeline: Timeline = {
      title: `drainguard demo: kubectl drain ${owner}`,
      startedAt: new Date(t0).toISOString(),
      endT,
      nodes: w.nodes.map((n) => n.name),
      vip: w.vip,
      leaseName: `${SITE_NS}/${LEASE}`,
      holderNodes: Object.fromEntries(routers.map((r) => [r.name, r.node])),
      probeIntervalMs: PROBE_MS,
      leaseIntervalMs: LEASE_POLL_MS,
      apiIntervalMs: API_POLL_MS,
      arp: rec.arp.filter((a) => a.t >= -1000),
      lease: rec.lease.filter((l) => l.t >= -1000),
      events: [
        ...rec.events.filter((e) => e.t >= -1000),
        ...(exitT !== null
          ? [
              {
                t: exitT,
                source: 'kubelet stand-in',
                text: 'leader container kube-adaptor of the drained router exited',
              },
            ]
          : []),
        ...netfilterNotes.map((text) => ({ t: -1000, source: 'before the drain', text })),
      ],
      marks: [
        { t: 0, label: `kubectl drain ${owner}` },
        ...(drainDone !== undefined ? [{ t: drainDone, label: 'drain done' }] : []),
      ],
      gaps,
    };
    const dir = join(tmpdir(), `drainguard-demo-${new Date(started).toISOString().replace(/[:.]/g, '-')}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'timeline.json'), `${JSON.stringify(timeline, null, 2)}\n`);
    const report = join(dir, 'report.html');
    writeFileSync(report, renderReport(timeline));

    step(9, 'cleanup');
    return finish(w, kubelet, routers, report);
  } catch (e) {
    process.stderr.write(`demo failed: ${(e as Error).stack ?? e}\n`);
    await cleanup(w, kubelet, routers);
    return 1;
  }
}

async function cleanup(w: L2World, kubelet: KubeletStandIn | undefined, routers: Router[]): Promise<void> {
  await kubelet?.stop().catch(() => undefined);
  for (const r of routers) {
    await r.sim.stop().catch(() => undefined);
    if (r.sidecar.exitCode === null) r.sidecar.kill('SIGKILL');
  }
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await w.destroy().catch(() => undefined);
}

async function finish(
  w: L2World,
  kubelet: KubeletStandIn,
  routers: Router[],
  report: string,
): Promise<number> {
  await cleanup(w, kubelet, routers);
  say('namespaces, processes and the control plane removed');
  process.stdout.write(`report: ${report}\n`);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`demo failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
