// The candidates as the L2 handover reads them (CandidateView: CandidateReader in candidates.ts, a
// fake in unit tests), and the two parts the reader computes them from: the wide lists as watched,
// the narrow reads as last read.
import type { Informer } from '../../shared/kube/informer.ts';
import type { KubeObject } from '../../shared/kube/types.ts';
import type { ServiceVips } from '../../shared/l2-state.ts';
import type { MetalLbConfig } from './eligibility.ts';

/** The candidates as last read (a fake in unit tests). */
export interface CandidateView {
  /** Nodes other than this one that could announce; undefined = not known. */
  readonly others: string[] | undefined;
  /** Per service, the candidates MetalLB would let announce it. */
  readonly perService: Record<string, string[]> | undefined;
  /**
   * MetalLB's address pools (every IPAddressPool's `spec.addresses` entries) from the last read
   * that succeeded; undefined when never read. Kept when a later read fails: the fail-safe needs
   * them exactly when the API is gone.
   */
  readonly pools?: string[] | undefined;
  /** Reads the pools alone (at start, and now and then): one list in MetalLB's namespace. */
  readPools?(): Promise<void>;
  /**
   * A handover wants the candidates: the first call lists every Node and speaker pod (paged) and
   * watches them from then on; later calls recompute from the watched view. `fresh`: a decision
   * is about to be taken (a handover starts) — it waits for the first list, and a view that is
   * not current then is not known. `waiting`: a refused handover that only waits for a change
   * (the watches show it; the narrow reads slow down). `isLocal` tells the services with
   * externalTrafficPolicy: Local.
   */
  refresh(
    fresh: boolean,
    services: readonly ServiceVips[],
    isLocal: (service: string) => boolean,
    waiting?: boolean,
    /** Aborted: stop waiting and abandon the reads in flight (the fail-safe is due). */
    signal?: AbortSignal,
  ): Promise<void>;
  /** No handover needs the candidates now (fenced, given up, drain over): the watches stop. */
  release?(): Promise<void>;
}

/** An informer, and its first list while it arrives. */
export interface Watched {
  informer: Informer;
  /** Listed, or failed to (the informer retries on with a backoff). */
  settled: boolean;
  /** The pages of its first list so far (trimmed): a part of what the list will hold. */
  partial: KubeObject[];
}

/** The narrow reads, as last read. */
export interface NarrowRead {
  metallb: MetalLbConfig | undefined;
  ready: Map<string, string[]>;
  /** The Local services read (a new one is read at once). */
  locals: string;
  at: number;
}
