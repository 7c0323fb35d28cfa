// Pure decision core of the Lease handover: which Leases are ours, who should take over,
// and what to write. Plain data in, plain data out; time comes in as `nowMs`.
import type { IdentityScheme, Profile } from '../../shared/contract.ts';
import type { Lease, Node, Pod } from '../../shared/kube/types.ts';
import { microTime } from '../../shared/kube/types.ts';
import { matchesDrainTaint } from '../drain/state.ts';

export interface LeaseRef {
  namespace: string;
  name: string;
}

/** `name` or `namespace/name`; anything else is an error naming DRAINGUARD_LEASES. */
export function parseLeaseRefs(items: readonly string[], defaultNamespace: string): LeaseRef[] {
  return items.map((item) => {
    const parts = item.split('/');
    const ok = (s: string | undefined) => s !== undefined && /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(s);
    if (parts.length === 1 && ok(parts[0])) return { namespace: defaultNamespace, name: parts[0]! };
    if (parts.length === 2 && ok(parts[0]) && ok(parts[1])) return { namespace: parts[0]!, name: parts[1]! };
    throw new Error(
      `DRAINGUARD_LEASES entry ${JSON.stringify(item)}: accepted forms are <name> or <namespace>/<name> (lowercase DNS names)`,
    );
  });
}

/** Reasons of the Events the handover records on its pod (every message names "Lease <ns>/<name>"); `drainguard status` reads them. */
export const LEASE_EVENT_REASONS = {
  handedOver: 'LeaseHandedOver',
  unverified: 'LeaseHandoverUnverified',
  observed: 'LeaseHandoverObserved',
  failed: 'LeaseHandoverFailed',
  leftToExpire: 'LeaseLeftToExpire',
  identityShared: 'LeaseIdentityShared',
} as const;

export const SKUPPER_DEFAULTS = {
  leases: ['skupper-site-leader'],
  leaderContainer: 'kube-adaptor',
  successorSelector: 'skupper.io/component=router',
  identityScheme: 'pod-name' as IdentityScheme,
};

export interface LeaseSettings {
  leases: LeaseRef[];
  leaderContainer: string;
  successorSelector: string;
  identityScheme: IdentityScheme;
}

/** The profile fills what the environment leaves empty (skupper routers need no annotations). */
export function leaseSettings(
  profile: Profile,
  env: {
    leases: string[];
    guardedContainer: string;
    successorSelector: string;
    identityScheme: IdentityScheme;
  },
  namespace: string,
): LeaseSettings {
  const skupper = profile === 'skupper-router';
  const leases = env.leases.length > 0 ? env.leases : skupper ? SKUPPER_DEFAULTS.leases : [];
  const leaderContainer = env.guardedContainer || (skupper ? SKUPPER_DEFAULTS.leaderContainer : '');
  const successorSelector = env.successorSelector || (skupper ? SKUPPER_DEFAULTS.successorSelector : '');
  const problems: string[] = [];
  if (leases.length === 0) problems.push('DRAINGUARD_LEASES is empty: name the Lease(s) to hand over');
  if (!leaderContainer)
    problems.push(
      'DRAINGUARD_GUARDED_CONTAINER is empty: name the leader container (the one that holds the Lease)',
    );
  if (problems.length > 0) throw new Error(problems.join('; '));
  return {
    leases: parseLeaseRefs(leases, namespace),
    leaderContainer,
    successorSelector,
    identityScheme: env.identityScheme,
  };
}

/**
 * The hostname the kubelet gives a pod, which is what most electors use as identity: the node's
 * on the host network, else spec.hostname, else the pod name cut to 63 characters with trailing
 * '-' and '.' removed (kubelet's truncatePodHostnameIfNeeded).
 */
export function podHostname(pod: Pod): string {
  if (pod.spec?.hostNetwork) return pod.spec.nodeName ?? '';
  if (pod.spec?.hostname) return pod.spec.hostname;
  const name = pod.metadata?.name ?? '';
  return name.length <= 63 ? name : name.slice(0, 63).replace(/[-.]+$/, '');
}

/** The holderIdentity a pod's elector writes, by scheme (for pod-name-prefix: the part before `_`). */
export function podIdentity(pod: Pod, scheme: IdentityScheme): string {
  return scheme === 'node-name' ? (pod.spec?.nodeName ?? '') : podHostname(pod);
}

/** Does `holder` name this pod (whose identity under the scheme is `own`)? */
export function isOwnIdentity(
  holder: string | null | undefined,
  own: string,
  scheme: IdentityScheme,
): boolean {
  if (!holder || !own) return false;
  if (holder === own) return true;
  // controller-runtime: `<hostname>_<uuid>`.
  return scheme === 'pod-name-prefix' && holder.startsWith(`${own}_`);
}

/**
 * Other live pods that write the same holderIdentity as this pod (`identity`): a holder under it
 * may be any of them, renewing. Under node-name every other pod on this node (a DaemonSet's surge
 * rollout runs two); under pod-name a host-network pod on this node (its hostname is the node's)
 * or one with the same spec.hostname. Ready or not, terminating or not: its elector may run; only
 * a finished pod (Succeeded, Failed) is out.
 */
export function identitySharers(
  self: string,
  identity: string,
  pods: readonly Pod[],
  scheme: IdentityScheme,
): string[] {
  if (!identity) return [];
  return pods
    .filter((p) => {
      const name = p.metadata?.name ?? '';
      if (name === self || !p.spec?.nodeName) return false;
      if (p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed') return false;
      return podIdentity(p, scheme) === identity;
    })
    .map((p) => p.metadata?.name ?? '');
}

/**
 * Whether another pod can write this pod's identity: always under node-name; under the pod-name
 * schemes when the hostname is not the pod's own name (host network: the node's; spec.hostname;
 * a name cut to 63 characters).
 */
export function identityMayBeShared(pod: Pod | undefined, scheme: IdentityScheme): boolean {
  return scheme === 'node-name' || (pod !== undefined && podHostname(pod) !== pod.metadata?.name);
}

export type ContainerPhase = 'running' | 'waiting' | 'terminated' | 'unknown' | 'pod-gone';

/** The leader container as the API shows it. */
export function containerPhase(pod: Pod | undefined, container: string): ContainerPhase {
  if (!pod) return 'pod-gone';
  const st = [...(pod.status?.containerStatuses ?? []), ...(pod.status?.initContainerStatuses ?? [])].find(
    (c) => c.name === container,
  );
  if (!st?.state) return 'unknown';
  if (st.state.terminated) return 'terminated';
  if (st.state.running) return 'running';
  if (st.state.waiting) return 'waiting';
  return 'unknown';
}

/**
 * Only a `terminated` state proves the leader stopped. A pod that is simply gone may have been
 * force-deleted (grace 0) while its containers still run; a normal deletion cannot finish
 * before this sidecar exits, so the sidecar sees `terminated` first.
 */
export const leaderStopped = (p: ContainerPhase) => p === 'terminated';

export interface SuccessorInput {
  self: { name: string; nodeName: string };
  pods: readonly Pod[];
  /** Nodes by name; a missing node is treated as schedulable (the sidecar may not read other nodes). */
  nodes: ReadonlyMap<string, Node>;
  drainTaints: readonly string[];
}

export interface SuccessorChoice {
  /** The successor pod's name. */
  successor: string | undefined;
  successorPod?: Pod;
  successorNode: string | undefined;
  /** Every pod looked at and why it was passed over; logged so a choice can be explained. */
  rejected: { pod: string; why: string }[];
}

const isReady = (p: Pod) =>
  p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

/**
 * The node lifecycle controller's taint for a node it cannot hear from. (`not-ready` is not used:
 * admission puts it on every new Node until the controller sees it Ready, and a NotReady node
 * already fails the Ready condition check.)
 */
const UNREACHABLE_TAINT = 'node.kubernetes.io/unreachable';

function nodeUnusable(node: Node | undefined, drainTaints: readonly string[]): string | undefined {
  if (!node) return undefined;
  if (node.spec?.unschedulable) return 'node cordoned';
  const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
  if (ready && ready.status !== 'True') return `node not Ready (${ready.status})`;
  if (node.spec?.taints?.some((x) => x.key === UNREACHABLE_TAINT)) return `node tainted ${UNREACHABLE_TAINT}`;
  const t = node.spec?.taints?.find((x) => drainTaints.some((e) => matchesDrainTaint(x, e)));
  return t ? `node tainted ${t.key}` : undefined;
}

/**
 * Successor: Ready, not terminating, on a schedulable node; another node preferred, then
 * the oldest pod (most likely to have a warm cache), then name for a stable choice.
 */
export function chooseSuccessor(input: SuccessorInput): SuccessorChoice {
  const rejected: { pod: string; why: string }[] = [];
  const ok: Pod[] = [];
  for (const p of input.pods) {
    const name = p.metadata?.name ?? '';
    if (name === input.self.name) continue;
    if (p.metadata?.deletionTimestamp) rejected.push({ pod: name, why: 'terminating' });
    else if (!p.spec?.nodeName) rejected.push({ pod: name, why: 'not scheduled' });
    else if (p.status?.phase !== 'Running')
      rejected.push({ pod: name, why: `phase ${p.status?.phase ?? 'unknown'}` });
    else if (!isReady(p)) rejected.push({ pod: name, why: 'not Ready' });
    else {
      const why = nodeUnusable(input.nodes.get(p.spec.nodeName), input.drainTaints);
      if (why) rejected.push({ pod: name, why });
      else ok.push(p);
    }
  }
  ok.sort((a, b) => {
    const an = a.spec?.nodeName === input.self.nodeName ? 1 : 0;
    const bn = b.spec?.nodeName === input.self.nodeName ? 1 : 0;
    if (an !== bn) return an - bn;
    const at = a.metadata?.creationTimestamp ?? '';
    const bt = b.metadata?.creationTimestamp ?? '';
    if (at !== bt) return at < bt ? -1 : 1;
    return (a.metadata?.name ?? '') < (b.metadata?.name ?? '') ? -1 : 1;
  });
  const best = ok[0];
  return {
    successor: best?.metadata?.name,
    successorNode: best?.spec?.nodeName,
    ...(best ? { successorPod: best } : {}),
    rejected,
  };
}

export type HandoverDecision =
  | { action: 'skip'; why: string }
  | { action: 'replace'; successor: string; lease: Lease; why: string }
  | { action: 'release'; lease: Lease; why: string };

export interface DecideInput {
  lease: Lease;
  /** This pod's identity under the scheme. */
  identity: string;
  scheme: IdentityScheme;
  /** The successor's identity under the scheme. */
  successor: string | undefined;
  nowMs: number;
}

/**
 * What to write to one Lease. The result keeps metadata (resourceVersion included) so the
 * write is a compare-and-swap against what was read.
 */
export function decideHandover(input: DecideInput): HandoverDecision {
  const { lease, identity, scheme, successor } = input;
  const spec = lease.spec ?? {};
  const holder = spec.holderIdentity ?? '';
  if (!isOwnIdentity(holder, identity, scheme))
    return { action: 'skip', why: holder ? `held by ${holder}, not this pod` : 'not held by anyone' };
  const now = microTime(input.nowMs);
  const base: Lease = structuredClone(lease);
  // A full identity of a controller-runtime successor (`<pod>_<uuid>`) cannot be known: never make
  // one up. Under node-name a successor on this same node has this very identity: release instead.
  const canName =
    scheme !== 'pod-name-prefix' && successor !== undefined && successor !== '' && successor !== identity;
  // Coordinated leader election (KEP-4355, spec.strategy): only the API server's election
  // controller names a holder, by its strategy. A preferredHolder only asks the holder to end its
  // term (ours has stopped), and the controller replaces a held Lease only once it has expired; one
  // with no holder it fills after its next ping round (5-10 s). Release, keeping the strategy;
  // never name a holder the controller did not choose.
  if (canName && !spec.strategy) {
    return {
      action: 'replace',
      successor,
      lease: {
        ...base,
        spec: {
          ...base.spec,
          holderIdentity: successor,
          leaseDurationSeconds: spec.leaseDurationSeconds ?? 15,
          acquireTime: now,
          renewTime: now,
          leaseTransitions: (spec.leaseTransitions ?? 0) + 1,
        },
      },
      why: `hand over to ${successor}`,
    };
  }
  // client-go's release(): empty holder, duration 1 s, fresh times, transitions unchanged.
  const releasedSpec: Lease['spec'] = {
    ...base.spec,
    holderIdentity: '',
    leaseDurationSeconds: 1,
    acquireTime: now,
    renewTime: now,
    leaseTransitions: spec.leaseTransitions ?? 0,
  };
  delete releasedSpec.preferredHolder;
  return {
    action: 'release',
    lease: { ...base, spec: releasedSpec },
    why: spec.strategy
      ? `coordinated election (strategy ${spec.strategy}): release, the election controller names the holder`
      : successor === undefined
        ? 'no eligible successor: release'
        : `identity scheme ${scheme}: successor identity unknown, release`,
  };
}

/**
 * After a 409: the re-read Lease says whether to try again, stop, or whether our own write
 * landed (a retried write whose first response was lost): then it is what we wrote. `read` is
 * given when the identity may be shared (identityMayBeShared): still ours but renewed since that
 * read (made after our leader stopped), somebody else renews under our identity — never write
 * over that. (A unique identity renewed meanwhile was our stopped leader's late write: retry.)
 */
export function afterConflict(
  fresh: Lease | undefined,
  identity: string,
  scheme: IdentityScheme,
  wrote?: Lease,
  read?: Lease,
): 'retry' | 'stop' | 'landed' | 'renewed' {
  if (
    wrote &&
    fresh?.spec &&
    fresh.spec.holderIdentity === wrote.spec?.holderIdentity &&
    fresh.spec.renewTime === wrote.spec?.renewTime &&
    fresh.spec.acquireTime === wrote.spec?.acquireTime &&
    fresh.spec.preferredHolder === wrote.spec?.preferredHolder
  )
    return 'landed';
  if (!isOwnIdentity(fresh?.spec?.holderIdentity, identity, scheme)) return 'stop';
  return read?.spec && fresh?.spec?.renewTime !== read.spec.renewTime ? 'renewed' : 'retry';
}

export type VerifyState = 'pending' | 'renewed' | 'taken-by-other' | 'acquired';

/**
 * Has the written state been taken up? After a replace: the successor renewed (renewTime
 * moved on under its name). After a release: anybody acquired it.
 */
export function verifyProgress(
  written: Lease,
  current: Lease | undefined,
  action: 'replace' | 'release',
): { state: VerifyState; holder: string } {
  const holder = current?.spec?.holderIdentity ?? '';
  const writtenHolder = written.spec?.holderIdentity ?? '';
  if (!current) return { state: 'pending', holder };
  if (action === 'release') return { state: holder ? 'acquired' : 'pending', holder };
  if (holder !== writtenHolder) return { state: holder ? 'taken-by-other' : 'pending', holder };
  return { state: current.spec?.renewTime !== written.spec?.renewTime ? 'renewed' : 'pending', holder };
}
