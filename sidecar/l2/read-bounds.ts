// How the API reads around a handover are bounded: the timeouts, retries, hedges and page sizes of
// the candidates' reads (candidates.ts) and MetalLB's view's (metallb-view.ts), and how often the
// candidates' narrow reads repeat.
import { HEDGE_AFTER_MS } from '../../shared/kube/client.ts';

/**
 * How long a handover about to start waits for the wide lists' first pages, and after how long a
 * page with no byte yet is asked again on a new connection: a consistent list that reached an API
 * server whose etcd member is gone never starts answering (a healthy one starts a page of 250
 * Nodes in well under a second), and the copy costs at most one more page.
 */
export const WIDE_READ = { retries: 2, timeoutMs: 10_000, hedgeAfterMs: 2 * HEDGE_AFTER_MS };
/**
 * The narrow reads around a handover (pools, L2Advertisements, EndpointSlices: small): a couple
 * of retries and a short bound. One that reaches an API server whose etcd member is gone hangs
 * until its timeout: after HEDGE_AFTER_MS a copy goes out on a new connection (most likely to a
 * healthy server), and a retry after a failure on a new one too.
 */
export const NARROW_READ = { retries: 2, timeoutMs: 3_000, hedgeAfterMs: HEDGE_AFTER_MS };

/**
 * Nodes (or pods) per page of the wide lists: ~3 MiB of realistic Nodes, so the one page held at
 * a time stays small next to the sidecar's 64 MiB heap whatever the cluster's size.
 */
export const WIDE_PAGE_SIZE = 250;
/** The narrow reads (MetalLB's config, Local services' EndpointSlices) at most this often. */
export const REFRESH_MS = 2_000;
/** ... and while a refused handover only waits for a change (nothing is decided on them then). */
export const WAITING_REFRESH_MS = 10_000;
/** A view this old is dropped when its watch (or a narrow re-read) keeps failing. */
export const STALE_MS = 10_000;
