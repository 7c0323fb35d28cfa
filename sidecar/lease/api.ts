// The Lease handover's reads and writes through the API: the Lease, the successor candidates and
// their nodes, the pods that may share this pod's identity. Every call retries with jittered
// backoff inside the caller's deadline; 404 and 409 are answers, returned to the caller.
import { retryUntil } from '../../shared/backoff.ts';
import { ApiError, isApiError } from '../../shared/kube/api-error.ts';
import type { KubeList, Lease, Node, Pod } from '../../shared/kube/types.ts';
import type { FeatureContext } from '../feature.ts';
import { chooseSuccessor, identityMayBeShared, type LeaseRef, type LeaseSettings } from './core.ts';
import { leasePath } from './results.ts';

/** The reason of a request the client abandoned (the grace period is spent): never retried. */
const ABANDONED = 'Aborted';

/**
 * Which failed Lease API calls are tried again: any the API marks retryable and, as every call
 * here is a read or a resourceVersion-guarded replace, any other but 404 and 409 (answers).
 */
const retryableApiError = (e: unknown): boolean =>
  e instanceof ApiError && e.reason !== ABANDONED && (e.retryable || (e.code !== 404 && e.code !== 409));

export class LeaseApi {
  private readonly ctx: FeatureContext;
  /** Aborted when the feature stops: no call is retried after it. */
  private readonly signal: AbortSignal;

  constructor(ctx: FeatureContext, signal: AbortSignal) {
    this.ctx = ctx;
    this.signal = signal;
  }

  /** One API call, retried with jittered backoff until the deadline; other errors are returned to the caller. */
  call<T>(what: string, deadline: number, fn: () => Promise<T>): Promise<T> {
    return retryUntil(fn, {
      deadline,
      retryable: retryableApiError,
      clock: this.ctx.clock,
      backoff: { baseMs: 100, capMs: 2_000 },
      signal: this.signal,
      what,
      onRetry: (e, waitMs) =>
        this.ctx.log.warn(
          { what, code: (e as ApiError).code, err: (e as Error).message, retryInMs: waitMs },
          'API call failed; backing off',
        ),
    });
  }

  async read(ref: LeaseRef, deadline: number): Promise<Lease | undefined> {
    try {
      return await this.call('read Lease', deadline, () =>
        this.ctx.client.get<Lease>(leasePath(ref), { timeoutMs: 5_000 }),
      );
    } catch (e) {
      if (isApiError(e, 404)) return undefined;
      throw e;
    }
  }

  /** Replaces the Lease (resourceVersion-guarded: a 409 says it changed since the read). */
  write(ref: LeaseRef, lease: Lease, deadline: number): Promise<Lease> {
    return this.call('write Lease', deadline, () =>
      this.ctx.client.replace<Lease>(leasePath(ref), lease, { timeoutMs: 5_000 }),
    );
  }

  /** The successor candidates: the pods of the own namespace the selector names (none without one). */
  async candidatePods(settings: LeaseSettings, deadline: number): Promise<Pod[]> {
    if (!settings.successorSelector) return [];
    const config = this.ctx.config;
    const list = await this.call('list successor pods', deadline, () =>
      this.ctx.client.get<KubeList<Pod>>(`/api/v1/namespaces/${config.podNamespace}/pods`, {
        query: { labelSelector: settings.successorSelector },
        timeoutMs: 5_000,
      }),
    );
    return list.items ?? [];
  }

  /**
   * The pods that might write this pod's identity: the candidates; without a selector, the pods of
   * the own namespace on this node with the own pod's controller (all of them if it is unknown).
   */
  async sharerPool(settings: LeaseSettings, candidates: Pod[], deadline: number): Promise<Pod[]> {
    if (settings.successorSelector) return candidates;
    // A unique identity (a pod's own name) is nobody else's: no read needed.
    if (!identityMayBeShared(this.ctx.drain.pod, settings.identityScheme)) return [];
    const config = this.ctx.config;
    const list = await this.call('list pods on this node', deadline, () =>
      this.ctx.client.get<KubeList<Pod>>(`/api/v1/namespaces/${config.podNamespace}/pods`, {
        query: { fieldSelector: `spec.nodeName=${config.nodeName}` },
        timeoutMs: 5_000,
      }),
    );
    const controller = (p: Pod | undefined) => p?.metadata?.ownerReferences?.find((o) => o.controller)?.uid;
    const own = controller(this.ctx.drain.pod);
    return (list.items ?? []).filter((p) => own === undefined || controller(p) === own);
  }

  /** The successor among the candidates (read if not given), from their pods and nodes. */
  async successor(settings: LeaseSettings, deadline: number, listed?: Pod[]) {
    const config = this.ctx.config;
    const pods = listed ?? (await this.candidatePods(settings, deadline));
    const nodes = new Map<string, Node>();
    const names = [...new Set(pods.map((p) => p.spec?.nodeName).filter((n): n is string => !!n))];
    await Promise.all(
      names.map(async (n) => {
        try {
          nodes.set(
            n,
            await this.ctx.client.get<Node>(`/api/v1/nodes/${n}`, { timeoutMs: 3_000, retries: 1 }),
          );
        } catch {
          // Unknown node: treated as schedulable (the sidecar may lack rights to read it).
        }
      }),
    );
    return chooseSuccessor({
      self: { name: config.podName, nodeName: config.nodeName },
      pods,
      nodes,
      drainTaints: config.drainTaints,
    });
  }
}
