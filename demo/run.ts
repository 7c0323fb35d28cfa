// `make demo`: the whole system handling a drain on one machine, on real kubelets. The lab
// cluster (etcd, kube-apiserver, controller-manager, scheduler, three kubelets on containerd,
// kube-proxy, our images), drainguard installed from manifests/ with kubectl, MetalLB's speakers
// injected by labelling their namespace and `kubectl rollout restart`, a skupper site, stale
// azure-vnet rules cleaned by the standalone DaemonSet, then `kubectl drain` of the node that owns
// the VIP and holds the Lease — measured from the outside: ARP probes from a client namespace on
// the switch, reads of the API, and the simulators' own logs. MetalLB's speaker and skupper's
// kube-adaptor are simulators (their Go binaries cannot run here); the report says which is which.
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { macsIn, type ProbeRound, probeRounds, startArpProbe, stopProcess } from '../lab/bed/arp-probe.ts';
import { sh } from '../lab/bed/netns.ts';
import { type Cluster, startCluster } from '../lab/cluster/cluster.ts';
import { installDrainguard, installMetalLbBase, installNetfilterCleanup } from '../lab/cluster/install.ts';
import { followEvents } from '../lab/cluster/logs.ts';
import { installLoadBalancer, installSpeakers } from '../lab/cluster/metallb.ts';
import { prepareNetfilterScene } from '../lab/cluster/netfilter-scene.ts';
import { runningStatuses } from '../lab/cluster/pods.ts';
import { installSkupperSite, leaderChange, SKUPPER_LEASE, siteLeader } from '../lab/cluster/skupper.ts';
import { owner as metallbOwner } from '../lab/sim/speaker/election.ts';
import { waitFor } from '../shared/clock.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import type { KubeList, KubeObject, Lease, Node, Pod } from '../shared/kube/types.ts';
import { parseL2State } from '../shared/l2-state.ts';
import { EXCLUDE_LABEL, FENCE_TABLE, L2_STATE_ANNOTATION, LABEL_OWNED_ANNOTATION } from '../shared/names.ts';
import { podDiff, summarize } from './diff.ts';
import { renderReport } from './report.ts';
import {
  type ArpSample,
  type Component,
  firstAnsweredBy,
  type Gap,
  type LeaseSample,
  lastAnsweredBy,
  longestArpSilence,
  summaryTable,
  type Timeline,
  type TimelineEvent,
} from './timeline.ts';

const CLI = new URL('../cli/drainguard.ts', import.meta.url).pathname;
const METALLB_NS = 'metallb-system';
const SITE = 'skupper-site';
const BASELINE_SITE = 'skupper-baseline';
const NETFILTER_NS = 'netfilter-demo';
const ROUTER_SELECTOR = 'skupper.io/component=router';
/** Sampling: ARP round, Lease read and API read intervals (the report states them as resolution). */
const PROBE_MS = 50;
const LEASE_POLL_MS = 100;
const API_POLL_MS = 200;
const T = { timeoutMs: 180_000, intervalMs: 200 };
/** Event reasons left out of the timeline: a replacement pod starting, not the drain itself. */
const ROUTINE_EVENTS = new Set(['Pulled', 'Created', 'Started', 'MissingClusterDNS', 'FailedMount']);

const started = Date.now();
const clockText = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s`;
const say = (s: string) => process.stdout.write(`[${clockText()}] ${s}\n`);
/** A timeline line: time relative to the start of the drain. */
const tsay = (t: number, s: string) =>
  process.stdout.write(`  t=${t >= 0 ? '+' : '-'}${(Math.abs(t) / 1000).toFixed(2)}s  ${s}\n`);
const step = (n: number, s: string) => process.stdout.write(`\n== ${n}. ${s}\n`);
const indent = (text: string) => {
  for (const l of text.trimEnd().split('\n')) process.stdout.write(`          ${l}\n`);
};

/** What ran, real or simulated: the report's first table. */
const COMPONENTS: Component[] = [
  {
    name: 'etcd, kube-apiserver, kube-controller-manager, kube-scheduler (1.20)',
    real: true,
    note: 'built from the Debian source tree',
  },
  {
    name: 'kubelet ×3 on containerd, runc, CNI bridge; kube-proxy',
    real: true,
    note: 'one network and mount namespace per node',
  },
  { name: 'kubectl (apply -k, label, rollout restart, drain)', real: true, note: 'as a user runs it' },
  {
    name: 'drainguard webhook and sidecar',
    real: true,
    note: 'image drainguard:dev built from the Dockerfile with buildah',
  },
  { name: 'nft, ebtables, ip (fence, netfilter cleanup)', real: true, note: 'in the nodes’ namespaces' },
  {
    name: 'MetalLB speaker',
    real: false,
    note: 'lab/sim/speaker: memberlist-style liveness, owner hash, ARP, ServiceL2Status',
  },
  {
    name: 'MetalLB controller (IP assignment)',
    real: false,
    note: 'the demo writes the Service’s status.loadBalancer',
  },
  {
    name: 'skupper kube-adaptor (leader election)',
    real: false,
    note: 'lab/sim/lease-candidate: client-go leaderelection, 15 s / 10 s / 2 s',
  },
  {
    name: 'azure-vnet leftovers',
    real: false,
    note: 'rules and neighbours written as azure-vnet leaves them (facts.md)',
  },
];

interface ContainerStatusJson {
  name: string;
  ready: boolean;
  containerID?: string;
}
interface PodJson extends Pod {
  spec?: Pod['spec'] & { initContainers?: { name: string; restartPolicy?: string }[] };
  status?: Pod['status'] & {
    containerStatuses?: ContainerStatusJson[];
    initContainerStatuses?: ContainerStatusJson[];
  };
}
interface EventJson extends KubeObject {
  reason?: string;
  message?: string;
  source?: { component?: string };
  reportingComponent?: string;
  involvedObject?: { kind?: string; name?: string; namespace?: string };
}

/** One API client for the whole run (each Cluster.client() is a new connection pool). */
let apiClient: KubeClient | undefined;
const api = (c: Cluster) => {
  apiClient ??= c.client();
  return apiClient;
};

async function pods(c: Cluster, ns: string, selector: string): Promise<PodJson[]> {
  const list = JSON.parse(await c.k(['get', 'pods', '-n', ns, '-l', selector, '-o', 'json'])) as {
    items: PodJson[];
  };
  return list.items.filter((p) => !p.metadata?.deletionTimestamp);
}

/** A VIP on the switch that MetalLB's owner hash gives to `node` (so one drain moves both). */
function vipOwnedBy(c: Cluster, node: string): string {
  const names = c.nodes.map((n) => n.name);
  for (let h = 100; h < 200; h++) if (metallbOwner(names, c.bed.addr4(h)) === node) return c.bed.addr4(h);
  throw new Error(`no address in ${c.bed.addr4(100)}–199 hashes to ${node}`);
}

function showDiff(before: unknown, after: PodJson): void {
  const volatile =
    /^(metadata\.(name|uid|resourceVersion|creationTimestamp|managedFields|selfLink|ownerReferences)|status)|\.(terminationMessage\w*|imagePullPolicy)$|^spec\.(dnsPolicy|restartPolicy|schedulerName|securityContext|enableServiceLinks|preemptionPolicy|priority|tolerations|affinity)|pod-template-generation|controller-revision-hash/;
  say(
    `webhook injected ${after.metadata?.namespace}/${after.metadata?.name} (diff against the pod it replaced):`,
  );
  for (const l of summarize(
    podDiff(before, after, (p) => volatile.test(p)),
    16,
  ))
    process.stdout.write(`          ${l}\n`);
}

interface Recorder {
  arp: ArpSample[];
  lease: LeaseSample[];
  events: TimelineEvent[];
  note(t: number, source: string, text: string): void;
  stop(): Promise<void>;
}

/**
 * Probes and API readers, all timestamped on receipt relative to t0 (the drain). Events already
 * in the API when recording starts are not timeline rows.
 */
async function record(c: Cluster, vip: string, t0: number): Promise<Recorder> {
  const arp: ArpSample[] = [];
  const lease: LeaseSample[] = [];
  const events: TimelineEvent[] = [];
  const macToNode = new Map(c.nodes.map((n) => [c.bed.node(n.name).mac.toLowerCase(), n.name]));
  let lastArp = '?';
  const probe = startArpProbe(c.bed.node('client'), vip, PROBE_MS, (r: ProbeRound) => {
    const nodes = [...new Set(r.macs.map((m) => macToNode.get(m.toLowerCase()) ?? m))].sort();
    const t = r.t - t0;
    arp.push({ t, nodes });
    const v = nodes.join('+') || 'nobody';
    if (v !== lastArp) {
      tsay(t, `ARP probe from the client namespace: ${vip} answered by ${v}`);
      lastArp = v;
    }
  });
  const client = api(c);
  const seen = new Set<string>();
  const note = (t: number, source: string, text: string) => {
    events.push({ t, source, text });
    tsay(t, `${source}: ${text}`);
  };
  const once = (key: string, source: string, text: string) => {
    if (seen.has(key)) return;
    seen.add(key);
    note(Date.now() - t0, source, text);
  };
  const listEvents = () => client.get<KubeList<EventJson>>('/api/v1/events');
  for (const e of (await listEvents()).items ?? []) seen.add(`event ${e.metadata?.uid}`);
  let running = true;
  const leaseLoop = (async () => {
    let last = '?';
    while (running) {
      try {
        const l = await client.get<Lease>(
          `/apis/coordination.k8s.io/v1/namespaces/${SITE}/leases/${SKUPPER_LEASE}`,
        );
        const holder = l.spec?.holderIdentity ?? '';
        const t = Date.now() - t0;
        lease.push({ t, holder, ...(l.spec?.renewTime ? { renewTime: l.spec.renewTime } : {}) });
        if (holder !== last) {
          tsay(
            t,
            `Lease ${SITE}/${SKUPPER_LEASE} read: holder ${holder || '(none)'}, renewed ${l.spec?.renewTime ?? '-'}`,
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
        for (const n of (await client.get<KubeList<Node>>('/api/v1/nodes')).items ?? []) {
          const name = n.metadata?.name ?? '';
          const ann = n.metadata?.annotations ?? {};
          if (n.spec?.unschedulable)
            once(`cordon ${name}`, `Node ${name} (API read)`, 'cordoned (spec.unschedulable)');
          if (n.metadata?.labels?.[EXCLUDE_LABEL] !== undefined)
            once(
              `label ${name}`,
              `Node ${name} (API read)`,
              `label ${EXCLUDE_LABEL} present${ann[LABEL_OWNED_ANNOTATION] === 'true' ? ' (added by drainguard)' : ''}`,
            );
          const st = parseL2State(ann[L2_STATE_ANNOTATION]);
          if (st)
            once(
              `phase ${name} ${st.phase}`,
              `Node ${name} (API read)`,
              `drainguard L2 phase ${st.phase}${st.fenced ? ` (fence: nft table ${FENCE_TABLE})` : ''}${Object.keys(st.handedTo).length ? `, handed to ${Object.values(st.handedTo).join(',')}` : ''}`,
            );
        }
        const statuses = await client.get<
          KubeList<
            KubeObject & { status?: { node?: string; serviceName?: string; serviceNamespace?: string } }
          >
        >(`/apis/metallb.io/v1beta1/namespaces/${METALLB_NS}/servicel2statuses`);
        for (const s of statuses.items ?? [])
          if (s.status?.node)
            once(
              `l2status ${s.status.node} ${s.status.serviceName}`,
              'ServiceL2Status (API read, written by the speaker simulator)',
              `${s.status.serviceNamespace}/${s.status.serviceName} announced by ${s.status.node}`,
            );
        // Every new Event: the kubelet's, the controllers', the scheduler's and drainguard's own
        // (not the kubelet's routine ones for the pods that start elsewhere).
        for (const e of (await listEvents()).items ?? []) {
          if (ROUTINE_EVENTS.has(e.reason ?? '')) continue;
          const by = e.source?.component || e.reportingComponent || '?';
          const obj = e.involvedObject;
          once(
            `event ${e.metadata?.uid}`,
            `Event from ${by} (API read)`,
            `${e.reason} ${obj?.kind ?? '?'} ${obj?.namespace ? `${obj.namespace}/` : ''}${obj?.name ?? '?'}: ${e.message ?? ''}`,
          );
        }
        for (const ns of [SITE, METALLB_NS])
          for (const p of (await client.get<KubeList<Pod>>(`/api/v1/namespaces/${ns}/pods`)).items ?? [])
            if (p.metadata?.deletionTimestamp)
              once(`deleting ${p.metadata.name}`, `Pod ${ns}/${p.metadata.name} (API read)`, 'being deleted');
      } catch {}
      await new Promise((r) => setTimeout(r, API_POLL_MS));
    }
  })();
  return {
    arp,
    lease,
    events,
    note,
    async stop() {
      running = false;
      await stopProcess(probe, 'SIGKILL');
      await Promise.all([leaseLoop, apiLoop]);
    },
  };
}

/**
 * The same failures without drainguard, measured now on the same cluster: the uninjected site's
 * leader pod deleted (skupper does not release: the Lease is left to expire), and the announcing
 * speaker frozen (SIGSTOP: a node that stops without a memberlist leave) until a peer answers.
 */
async function baselines(
  c: Cluster,
  vip: string,
  announcer: string,
): Promise<{ leaseMs: number | null; arpMs: number | null }> {
  const leaseRun = (async (): Promise<number | null> => {
    try {
      const leader = (await siteLeader(c, BASELINE_SITE)).metadata.name;
      const w = await leaderChange(c, BASELINE_SITE, leader, async () => {
        await c.k(['delete', 'pod', '-n', BASELINE_SITE, leader, '--wait=false']);
        say(
          `baseline: kubectl delete pod ${BASELINE_SITE}/${leader} (the leader; not injected, the Lease is left to expire)`,
        );
      });
      const ms = w.leadingAt - w.stoppedAt;
      say(`baseline: ${w.next} leads ${(ms / 1000).toFixed(1)} s after the old leader stopped`);
      return ms;
    } catch (e) {
      say(`baseline Lease not measured: ${(e as Error).message}`);
      return null;
    }
  })();
  const arpRun = (async (): Promise<number | null> => {
    const rounds: ArpSample[] = [];
    const macToNode = new Map(c.nodes.map((n) => [c.bed.node(n.name).mac.toLowerCase(), n.name]));
    const probe = startArpProbe(c.bed.node('client'), vip, PROBE_MS, (r) =>
      rounds.push({ t: r.t, nodes: r.macs.map((m) => macToNode.get(m.toLowerCase()) ?? m) }),
    );
    let pids: string[] = [];
    try {
      await waitFor('baseline probe running', () => rounds.length > 5, T);
      const speaker = (await pods(c, METALLB_NS, 'component=speaker')).find(
        (p) => p.spec?.nodeName === announcer,
      );
      const id = speaker?.status?.containerStatuses
        ?.find((s) => s.name === 'speaker')
        ?.containerID?.replace(/^\w+:\/\//, '');
      if (!id) throw new Error(`no speaker container on ${announcer}`);
      // Every process of the container (the speaker and its ARP helper), as a node that stops.
      const ps = await c.node(announcer).ctr(['tasks', 'ps', id]);
      pids = ps.stdout
        .split('\n')
        .map((l) => l.trim().split(/\s+/)[0] ?? '')
        .filter((x) => /^\d+$/.test(x));
      if (pids.length === 0)
        throw new Error(`speaker task ${id} on ${announcer}: no processes (${ps.stderr.trim()})`);
      const frozen = Date.now();
      await sh(['kill', '-STOP', ...pids]);
      say(
        `baseline: speaker on ${announcer} frozen while announcing (as a node that stops), no drainguard involved`,
      );
      await waitFor(
        'another speaker to answer',
        () => rounds.some((x) => x.t > frozen && x.nodes.length > 0 && !x.nodes.includes(announcer)),
        { timeoutMs: 60_000, intervalMs: 50 },
      );
      const ms = longestArpSilence(rounds, frozen - 1, rounds.at(-1)?.t ?? frozen);
      say(`baseline: ${vip} unanswered for ${(ms / 1000).toFixed(1)} s until a peer took over`);
      return ms;
    } catch (e) {
      say(`baseline ARP not measured: ${(e as Error).message}`);
      return null;
    } finally {
      if (pids.length) await sh(['kill', '-CONT', ...pids]);
      await stopProcess(probe, 'SIGKILL');
    }
  })();
  const [leaseMs, arpMs] = await Promise.all([leaseRun, arpRun]);
  return { leaseMs, arpMs };
}

async function main(): Promise<number> {
  process.stdout.write(
    'drainguard demo: a drain on real kubelets on one machine, measured from the outside\n',
  );
  if (process.getuid?.() !== 0) {
    process.stderr.write(
      'make demo needs root: it creates network namespaces, cgroups, nft tables and raw sockets\n',
    );
    return 2;
  }
  // Ctrl-C: exit, and the cluster's exit hook removes everything it made.
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => process.exit(130));

  step(
    1,
    'a three-node cluster: etcd, kube-apiserver, controllers, scheduler, kubelets on containerd (lab/cluster)',
  );
  const c = await startCluster({ clients: ['client'], log: (l) => say(`cluster: ${l}`) });
  say(`cluster state ${c.dir}`);
  try {
    indent(await c.k(['get', 'nodes', '-o', 'wide']));
    const k = (args: string[]) => c.k(args);

    step(
      2,
      'drainguard from manifests/ (kubectl apply -k of the self-managed overlay), MetalLB namespace and CRDs',
    );
    await installMetalLbBase(c);
    await installDrainguard(c);
    indent(await k(['get', 'pods', '-n', 'drainguard-system', '-o', 'wide']));

    step(
      3,
      'in parallel: MetalLB speakers (DaemonSet) injected by label + rollout restart; two skupper sites',
    );
    const speakersInjected = (async () => {
      await installSpeakers(c, { inject: false });
      const before = (await pods(c, METALLB_NS, 'component=speaker'))[0];
      say(
        `speakers running without drainguard; kubectl label namespace ${METALLB_NS} drainguard.io/inject=enabled`,
      );
      await k(['label', 'namespace', METALLB_NS, 'drainguard.io/inject=enabled']);
      say('kubectl rollout restart daemonset/speaker');
      await k(['rollout', 'restart', '-n', METALLB_NS, 'daemonset/speaker']);
      await k(['rollout', 'status', '-n', METALLB_NS, 'daemonset/speaker', '--timeout=180s']);
      const speakers = await waitFor(
        'three injected speaker pods, both containers Ready',
        async () => {
          const ps = await pods(c, METALLB_NS, 'component=speaker');
          return ps.length === 3 &&
            ps.every((p) => runningStatuses(p).length === 2 && runningStatuses(p).every((x) => x.ready))
            ? ps
            : undefined;
        },
        T,
      );
      const after = speakers.find((p) => p.spec?.nodeName === before?.spec?.nodeName);
      if (after) showDiff(before, after);
    })();
    const sites = (async () => {
      await Promise.all([
        installSkupperSite(c, SITE, { inject: true }),
        installSkupperSite(c, BASELINE_SITE, { inject: false }),
      ]);
      say(
        `skupper sites running: ${SITE} injected (namespace labelled), ${BASELINE_SITE} without drainguard`,
      );
    })();
    await Promise.all([speakersInjected, sites]);
    const leader = await siteLeader(c, SITE);
    const drained = leader.spec.nodeName;
    const routerNodes = Object.fromEntries(
      (await pods(c, SITE, ROUTER_SELECTOR)).map((p) => [p.metadata?.name ?? '', p.spec?.nodeName ?? '']),
    );
    const successor = Object.keys(routerNodes).find((n) => n !== leader.metadata.name) ?? '';
    say(
      `${SITE}: ${leader.metadata.name} on ${drained} holds the Lease; ${successor} on ${routerNodes[successor]} waits`,
    );

    step(4, `a LoadBalancer Service whose VIP MetalLB's hash gives to ${drained}`);
    const vip = vipOwnedBy(c, drained);
    await installLoadBalancer(c, vip);
    await waitFor(
      `only ${drained} answers ${vip}`,
      async () => {
        const macs = macsIn(await probeRounds(c.bed.node('client'), vip, 6, 50));
        return macs.length === 1 && macs[0] === c.bed.node(drained).mac.toLowerCase();
      },
      T,
    );
    say(`Service web/www type LoadBalancer, VIP ${vip}, announced by ${drained}`);
    const newOwner = metallbOwner(
      c.nodes.map((n) => n.name).filter((n) => n !== drained),
      vip,
    ) as string;

    const nfNode = c.nodes.map((n) => n.name).find((n) => n !== drained && n !== newOwner) ?? newOwner;
    step(
      5,
      `stale azure-vnet rules on ${nfNode} for a reused pod IP; the standalone cleanup DaemonSet applied`,
    );
    const scene = await prepareNetfilterScene(c, nfNode, NETFILTER_NS);
    const netfilterNotes: string[] = [];
    const noteNetfilter = (text: string) => {
      netfilterNotes.push(text);
      say(text);
    };
    const reachBefore = await scene.reachable();
    noteNetfilter(
      `pod ${NETFILTER_NS}/target (${scene.target}, a reused IP) ${reachBefore ? 'reachable' : 'unreachable'} from its neighbour pod: the stale arpreply answers with a dead MAC`,
    );
    const cleanupApplied = Date.now();
    await installNetfilterCleanup(c);
    await waitFor('stale rules removed', () => scene.cleaned(), T);
    const rules = await scene.rules();
    const kept = scene.kept.filter((r) => rules.includes(r)).length;
    noteNetfilter(
      `the cleanup DaemonSet removed ${scene.stale.length} stale rules and 1 neighbour; ${kept} of ${scene.kept.length} protected rules kept`,
    );
    // The client pod's neighbour cache still holds the dead MAC until the kernel re-probes
    // (tens of seconds): reachability is checked again at the end, not waited for here.
    say(
      'reachability of the reused IP is checked again after the drain (the client pod re-learns its neighbour)',
    );

    step(6, `kubectl drain ${drained} (owns the VIP; its router holds the Lease) — live timeline`);
    const t0 = Date.now() + 1500;
    const rec = await record(c, vip, t0);
    const oldLog = followEvents(c, SITE, leader.metadata.name, 'kube-adaptor');
    const newLog = followEvents(c, SITE, successor, 'kube-adaptor');
    await waitFor('router logs open', () => oldLog.lines.length > 0 && newLog.lines.length > 0, T);
    await new Promise((r) => setTimeout(r, Math.max(0, t0 - Date.now())));
    tsay(0, `kubectl drain ${drained} --ignore-daemonsets --delete-emptydir-data`);
    const drainStart = Date.now();
    let drainDone: number | undefined;
    const drain = c
      .kubectl(['drain', drained, '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=120s'])
      .then((r) => {
        drainDone = Date.now() - t0;
        tsay(
          drainDone,
          `kubectl drain finished (exit ${r.code})${r.code !== 0 ? `: ${r.stderr.trim().split('\n').pop()}` : ''}`,
        );
      });
    const fromLog = (log: typeof oldLog, ev: string) =>
      log.events.find((e) => e.ev === ev && e.t >= drainStart);
    await waitFor(
      'the handover to finish (successor leading, VIP answered by the new owner only for 3 s)',
      () => {
        const since = rec.arp.filter((a) => a.t >= Date.now() - t0 - 3000);
        const arpMoved =
          since.length > 20 && since.every((a) => a.nodes.length === 1 && a.nodes[0] === newOwner);
        return (
          arpMoved &&
          fromLog(oldLog, 'stopped-leading') !== undefined &&
          rec.lease.at(-1)?.holder === successor &&
          fromLog(newLog, 'leading') !== undefined
        );
      },
      { timeoutMs: 120_000, intervalMs: 100 },
    ).catch((e: Error) => say(`not everything settled: ${e.message}`));
    // kubectl drain goes on while the evicted pods terminate (the webhook's own drain period):
    // its end is marked when it comes, the baselines need not wait for it.
    await rec.stop();
    oldLog.proc.kill();
    newLog.proc.kill();
    const endT = Date.now() - t0;
    const stopped = fromLog(oldLog, 'stopped-leading');
    const leading = fromLog(newLog, 'leading');
    if (stopped)
      rec.events.push({
        t: stopped.t - t0,
        source: 'kube-adaptor log (simulator, in the evicted pod)',
        text: `${leader.metadata.name} stopped leading (the kubelet stopped its container)`,
      });
    if (leading)
      rec.events.push({
        t: leading.t - t0,
        source: 'kube-adaptor log (simulator)',
        text: `${successor} started leader work`,
      });

    const status = await sh([process.execPath, CLI, 'status', '--kubeconfig', c.kubeconfigPath]);
    say(
      `drainguard status${status.code !== 0 ? ` failed: ${status.stderr.trim()}` : ' (what an operator sees now):'}`,
    );
    indent(status.stdout);

    step(7, 'baselines: the same failures without drainguard, measured now on this cluster');
    const base = await baselines(c, vip, newOwner);

    await drain;
    const reachAfter = await waitFor('the reused IP reachable', () => scene.reachable(), T).catch(
      () => false,
    );
    noteNetfilter(
      `pod ${NETFILTER_NS}/target ${reachAfter ? 'reachable' : 'still unreachable'} after the cleanup (checked ${((Date.now() - cleanupApplied) / 1000).toFixed(0)} s after it was applied)`,
    );

    step(8, 'summary');
    const exitT = stopped ? stopped.t - t0 : null;
    const leaseAt = rec.lease.find((l) => l.t >= 0 && l.holder === successor)?.t ?? null;
    const leadT = leading ? leading.t - t0 : null;
    const gaps: Gap[] = [
      {
        name: `VIP ${vip} unanswered (longest, from drain start)`,
        measuredMs: longestArpSilence(rec.arp, 0, endT),
        measuredFrom: `ARP probes from the client namespace every ${PROBE_MS} ms`,
        baselineMs: base.arpMs,
        baselineNote:
          'measured: announcing speaker frozen (a node that stops), no drainguard; peers wait for failure detection (simulator 5 s; MetalLB 5–24 s)',
      },
      {
        name: `drain start → ${newOwner} answers ARP`,
        measuredMs: firstAnsweredBy(rec.arp, newOwner, 0),
        measuredFrom: 'ARP probes from the client namespace',
        baselineMs: null,
        baselineNote:
          'never while the speaker runs: DaemonSet pods survive drains, cordon is ignored (MetalLB ≥ 0.15)',
      },
      {
        name: `${drained} still answering after drain start`,
        measuredMs: lastAnsweredBy(rec.arp, drained, 0),
        measuredFrom: 'ARP probes from the client namespace',
        baselineMs: null,
        baselineNote: 'until the speaker process exits',
      },
      {
        name: `leader stopped → Lease names ${successor}`,
        measuredMs: exitT !== null && leaseAt !== null ? Math.max(0, leaseAt - exitT) : null,
        measuredFrom: `old leader's log (its exit) to a Lease read (every ${LEASE_POLL_MS} ms)`,
        baselineMs: base.leaseMs,
        baselineNote:
          'measured: uninjected site, leader pod deleted, Lease left to expire (15 s + 2–4.4 s retry, skupper timings)',
      },
      {
        name: `leader stopped → ${successor} leads (leaderless window)`,
        measuredMs: exitT !== null && leadT !== null ? Math.max(0, leadT - exitT) : null,
        measuredFrom: "both routers' logs (same machine clock)",
        baselineMs: base.leaseMs,
        baselineNote: 'same baseline run: there the first leader work of the next holder',
      },
    ];
    process.stdout.write(`${summaryTable(gaps)}\n`);
    if (drainStart > t0 + 500) say('note: the drain started late (machine busy)');
    const timeline: Timeline = {
      title: `drainguard demo on real kubelets: kubectl drain ${drained}`,
      startedAt: new Date(t0).toISOString(),
      endT,
      nodes: c.nodes.map((n) => n.name),
      vip,
      leaseName: `${SITE}/${SKUPPER_LEASE}`,
      holderNodes: routerNodes,
      probeIntervalMs: PROBE_MS,
      leaseIntervalMs: LEASE_POLL_MS,
      apiIntervalMs: API_POLL_MS,
      components: COMPONENTS,
      arp: rec.arp.filter((a) => a.t >= -1000),
      lease: rec.lease.filter((l) => l.t >= -1000),
      events: [
        ...rec.events.filter((e) => e.t >= -1000),
        ...netfilterNotes.map((text) => ({ t: -1000, source: 'before the drain (step 5)', text })),
      ],
      marks: [
        { t: 0, label: `kubectl drain ${drained}` },
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
    apiClient?.close();
    await c.stop();
    say('cluster stopped: processes, namespaces, mounts and cgroups removed');
    process.stdout.write(`report: ${report}\n`);
    return 0;
  } catch (e) {
    process.stderr.write(`demo failed: ${(e as Error).stack ?? e}\n${c.logs(3000)}\n`);
    await c.stop().catch(() => undefined);
    return 1;
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`demo failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
