// `drainguard status`: what drainguard is doing in a cluster, read from the API only — the
// sidecars publish their state on the Node (annotations/label) and as Events, the webhook
// records what it injected on each pod. Pure core (buildStatus/renderStatus) plus a thin reader.

import { DEFAULT_DRAIN_TAINTS } from '../shared/contract.ts';
import { isApiError } from '../shared/kube/api-error.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { kubeconfigUsage } from '../shared/kube/kubeconfig-usage.ts';
import type { KubeList, KubeObject, Lease, Node, Pod } from '../shared/kube/types.ts';
import { ANNOTATIONS, L2_STATE_ANNOTATION, SIDECAR_NAME } from '../shared/names.ts';
import { formatTable } from '../shared/table.ts';
import { nodeDrainReason } from '../sidecar/drain/state.ts';
import { LEASE_EVENT_REASONS, parseLeaseRefs, SKUPPER_DEFAULTS } from '../sidecar/lease/core.ts';
import { CommandLine, KUBECONFIG_OPTIONS } from './command-line.ts';
import { formatRows, type NodeRow as L2NodeRow, rowsOf } from './l2-status.ts';

export const USAGE = `Usage: drainguard status [--kubeconfig PATH] [--context NAME] [-o table|json] [NODE...]

Per node: draining?, VIPs it announces (MetalLB ServiceL2Status), L2 handover phase, fence
installed?, where its VIPs were handed over to, and whether the
exclude-from-external-load-balancers label is there because drainguard added it (all read from
the Node annotation ${L2_STATE_ANNOTATION} and label bookkeeping the sidecar publishes).
Per Lease guarded by an injected pod: holder, last renew, last handover (from the Events the
sidecar records). Reads only; needs get/list on nodes, pods, services, leases, events and
servicel2statuses.metallb.io.

${kubeconfigUsage(18)}
  -o, --output FMT   table (default) or json (--json is the same as -o json)
  NODE...            only these nodes (default all)

Exit: 0 printed, 1 API error, 2 bad usage.
`;

export interface EventLike {
  reason?: string;
  message?: string;
  type?: string;
  lastTimestamp?: string | null;
  eventTime?: string | null;
  firstTimestamp?: string | null;
  metadata?: { creationTimestamp?: string };
  involvedObject?: { kind?: string; name?: string; namespace?: string };
}

/**
 * One node: the L2 sidecar's row (from cli/l2-status.ts: cordoned, who added the exclude
 * label, the published L2State) plus what only the cluster-wide view knows.
 */
export interface NodeRow extends L2NodeRow {
  /** Why the node counts as draining (cordoned, drain taint …), or null. */
  draining: string | null;
  fence: 'installed' | 'failsafe' | 'none' | 'unknown';
  /** VIPs this node announces now, per MetalLB's ServiceL2Status (the speakers' intent). */
  announces: string[];
  /** Injected pods scheduled on this node. */
  injectedPods: string[];
}

export interface LeaseRow {
  lease: string;
  guardedBy: string[];
  exists: boolean;
  holder: string;
  renewTime: string | null;
  lastHandover: { time: string; reason: string; message: string } | null;
}

export interface StatusReport {
  nodes: NodeRow[];
  leases: LeaseRow[];
}

interface InjectedStatus {
  profile?: string;
  features?: string[];
}

export function injectedStatus(pod: Pod): InjectedStatus | undefined {
  const raw = pod.metadata?.annotations?.[ANNOTATIONS.injected];
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(raw) as InjectedStatus;
  } catch {
    return {};
  }
}

const podKey = (p: Pod) => `${p.metadata?.namespace}/${p.metadata?.name}`;

type Container = { name: string; env?: { name: string; value?: string }[] };

/** The Leases an injected pod guards: its sidecar's DRAINGUARD_LEASES, else the profile's default. */
export function guardedLeases(pod: Pod): string[] {
  const injection = injectedStatus(pod);
  if (!injection) return [];
  const spec = pod.spec as { containers?: Container[]; initContainers?: Container[] } | undefined;
  const sidecar = [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])].find(
    (c) => c.name === SIDECAR_NAME,
  );
  const env = new Map((sidecar?.env ?? []).map((e) => [e.name, e.value ?? '']));
  const features = env.get('DRAINGUARD_FEATURES')?.split(',') ?? injection.features ?? [];
  if (!features.includes('lease-handover')) return [];
  const listed = (env.get('DRAINGUARD_LEASES') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const profile = env.get('DRAINGUARD_PROFILE') ?? injection.profile;
  const names = listed.length > 0 ? listed : profile === 'skupper-router' ? SKUPPER_DEFAULTS.leases : [];
  try {
    return parseLeaseRefs(names, pod.metadata?.namespace ?? 'default').map((r) => `${r.namespace}/${r.name}`);
  } catch {
    return [];
  }
}

const REASONS = new Set<string>(Object.values(LEASE_EVENT_REASONS));
const eventTime = (e: EventLike) =>
  e.lastTimestamp || e.eventTime || e.firstTimestamp || e.metadata?.creationTimestamp || '';

/** MetalLB's ServiceL2Status: which node announces which Service (metallb.io/v1beta1, MetalLB ≥ 0.14.4). */
export interface L2StatusLike {
  status?: { node?: string; serviceName?: string; serviceNamespace?: string };
}

export interface ServiceLike {
  metadata?: { name?: string; namespace?: string };
  status?: { loadBalancer?: { ingress?: { ip?: string }[] } };
}

/** node → VIPs it announces: ServiceL2Status names the service, the Service has the VIPs. */
export function announcedVips(l2: L2StatusLike[], services: ServiceLike[]): Map<string, string[]> {
  const vipsOf = new Map(
    services.map((s) => [
      `${s.metadata?.namespace}/${s.metadata?.name}`,
      (s.status?.loadBalancer?.ingress ?? []).map((i) => i.ip ?? '').filter(Boolean),
    ]),
  );
  const out = new Map<string, string[]>();
  for (const o of l2) {
    const node = o.status?.node;
    if (!node) continue;
    const vips = vipsOf.get(`${o.status?.serviceNamespace}/${o.status?.serviceName}`) ?? [];
    out.set(node, [...new Set([...(out.get(node) ?? []), ...vips])].sort());
  }
  return out;
}

export function buildStatus(input: {
  nodes: Node[];
  pods: Pod[];
  leases: Map<string, Lease | undefined>;
  events: EventLike[];
  l2Statuses?: L2StatusLike[];
  services?: ServiceLike[];
  drainTaints?: readonly string[];
}): StatusReport {
  const announced = announcedVips(input.l2Statuses ?? [], input.services ?? []);
  const injected = input.pods.filter((p) => injectedStatus(p) !== undefined);
  const byName = new Map(input.nodes.map((n) => [n.metadata?.name ?? '', n]));
  const nodes = rowsOf(input.nodes).map((r): NodeRow => {
    const l2 = r.status;
    return {
      ...r,
      draining: nodeDrainReason(byName.get(r.node), input.drainTaints ?? DEFAULT_DRAIN_TAINTS) ?? null,
      fence: !l2
        ? 'unknown'
        : !l2.fenced
          ? 'none'
          : l2.failsafe || l2.failsafeKept
            ? 'failsafe'
            : 'installed',
      announces: announced.get(r.node) ?? [],
      injectedPods: injected.filter((p) => p.spec?.nodeName === r.node).map(podKey),
    };
  });
  const guarded = new Map<string, string[]>();
  for (const p of injected)
    for (const l of guardedLeases(p)) guarded.set(l, [...(guarded.get(l) ?? []), podKey(p)]);
  const leases = [...guarded.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, pods]): LeaseRow => {
      const lease = input.leases.get(key);
      const mention = new RegExp(`Lease ${key.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![-a-z0-9.])`);
      const last = input.events
        .filter((e) => REASONS.has(e.reason ?? '') && mention.test(e.message ?? ''))
        .sort((a, b) => eventTime(a).localeCompare(eventTime(b)))
        .pop();
      return {
        lease: key,
        guardedBy: pods.sort(),
        exists: lease !== undefined,
        holder: lease?.spec?.holderIdentity ?? '',
        renewTime: lease?.spec?.renewTime ?? null,
        lastHandover: last
          ? { time: eventTime(last), reason: last.reason ?? '', message: last.message ?? '' }
          : null,
      };
    });
  return { nodes, leases };
}

export function renderStatus(r: StatusReport, now: number): string {
  const out: string[] = [];
  // The L2 sidecar's own view first (the same table `cli/l2-status.ts` formats), then the rest.
  out.push(formatRows(r.nodes, now).trimEnd());
  out.push('');
  const nodeRows = [['NODE', 'DRAINING', 'ANNOUNCES', 'INJECTED PODS']];
  for (const n of r.nodes)
    nodeRows.push([
      n.node,
      n.draining ?? 'no',
      n.announces.join(',') || '-',
      n.injectedPods.join(',') || '-',
    ]);
  out.push(formatTable(nodeRows));
  out.push('');
  if (r.leases.length === 0) out.push('No Leases guarded by injected pods.');
  else {
    const leaseRows = [['LEASE', 'HOLDER', 'RENEWED', 'LAST HANDOVER', 'GUARDED BY']];
    for (const l of r.leases)
      leaseRows.push([
        l.lease,
        l.exists ? l.holder || '(none)' : '(missing)',
        l.renewTime ?? '-',
        l.lastHandover ? `${l.lastHandover.time} ${l.lastHandover.reason}: ${l.lastHandover.message}` : '-',
        l.guardedBy.join(','),
      ]);
    out.push(formatTable(leaseRows));
  }
  return `${out.join('\n')}\n`;
}

async function list<T>(client: KubeClient, path: string): Promise<T[]> {
  const items: T[] = [];
  let cont = '';
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page = await client.get<KubeList<T>>(
      `${path}${sep}limit=500${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`,
    );
    items.push(...(page.items ?? []));
    cont = page.metadata?.continue ?? '';
  } while (cont);
  return items;
}

export async function readStatus(client: KubeClient): Promise<StatusReport> {
  const [nodes, pods] = await Promise.all([
    list<Node>(client, '/api/v1/nodes'),
    list<Pod>(client, '/api/v1/pods'),
  ]);
  const keys = new Set(pods.flatMap(guardedLeases));
  // ServiceL2Status only exists with MetalLB ≥ 0.14.4 installed: without the CRD, nothing announces.
  let l2Statuses: L2StatusLike[] = [];
  let services: ServiceLike[] = [];
  try {
    l2Statuses = await list<L2StatusLike>(client, '/apis/metallb.io/v1beta1/servicel2statuses');
    if (l2Statuses.length > 0) services = await list<ServiceLike>(client, '/api/v1/services');
  } catch (e) {
    if (!isApiError(e, 404)) throw e;
  }
  const leases = new Map<string, Lease | undefined>();
  const events: EventLike[] = [];
  for (const key of keys) {
    const [ns, name] = key.split('/') as [string, string];
    try {
      leases.set(
        key,
        await client.get<Lease>(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${name}`),
      );
    } catch (e) {
      if (!isApiError(e, 404)) throw e;
      leases.set(key, undefined);
    }
  }
  for (const ns of new Set([...keys].map((k) => k.split('/')[0] as string)))
    events.push(
      ...(await list<EventLike & KubeObject>(
        client,
        `/api/v1/namespaces/${ns}/events?fieldSelector=involvedObject.kind%3DPod`,
      )),
    );
  return buildStatus({ nodes, pods, leases, events, l2Statuses, services });
}

export async function run(argv: string[]): Promise<number> {
  const cli = new CommandLine('status', USAGE);
  const parsed = cli.parse(
    argv,
    { ...KUBECONFIG_OPTIONS, output: { type: 'string', short: 'o' }, json: { type: 'boolean' } },
    true,
  );
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed;
  const output = values.output ?? (values.json ? 'json' : 'table');
  if (output !== 'table' && output !== 'json')
    return cli.badValue(`-o ${JSON.stringify(output)}: accepted values are table, json`);
  const client = await cli.connect(values);
  if (typeof client === 'number') return client;
  try {
    const all = await readStatus(client);
    // NODE arguments narrow the node rows; the Lease rows stay (Leases are not per node).
    const report =
      positionals.length === 0
        ? all
        : { ...all, nodes: all.nodes.filter((n) => positionals.includes(n.node)) };
    process.stdout.write(
      output === 'json' ? `${JSON.stringify(report, null, 2)}\n` : renderStatus(report, Date.now()),
    );
    return 0;
  } catch (e) {
    return cli.fail((e as Error).message);
  } finally {
    client.close();
  }
}
