// The own Node as the handover reads and writes it: the exclude label (with the annotation saying
// drainguard added it) and the status annotation, merge-patched. What is current is the watched
// Node, or the answer to our own last patch until the watch has caught up with it.
import { HEDGE_AFTER_MS } from '../../shared/kube/client.ts';
import type { KubeObject, Node } from '../../shared/kube/types.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION, LABEL_OWNED_ANNOTATION } from '../../shared/names.ts';
import type { FeatureContext } from '../feature.ts';

const rv = (o: KubeObject | undefined) => Number(o?.metadata?.resourceVersion ?? 0);

export class OwnNode {
  private readonly ctx: FeatureContext;
  private readonly path: string;
  /** The Node as our own last patch returned it. */
  private patched: Node | undefined;

  constructor(ctx: FeatureContext) {
    this.ctx = ctx;
    this.path = `/api/v1/nodes/${ctx.config.nodeName}`;
  }

  current(): Node | undefined {
    const watched = this.ctx.drain.node;
    return this.patched && rv(this.patched) > rv(watched) ? this.patched : watched;
  }

  /** A fresh read (on start, before the watch has listed). */
  read(): Promise<Node> {
    return this.ctx.client.get<Node>(this.path, {
      retries: 1,
      timeoutMs: 3_000,
      hedgeAfterMs: HEDGE_AFTER_MS,
    });
  }

  async setExcludeLabel(on: boolean, signal?: AbortSignal): Promise<void> {
    this.patched = await this.ctx.client.patch<Node>(
      this.path,
      {
        metadata: {
          labels: { [EXCLUDE_LABEL]: on ? '' : null },
          annotations: { [LABEL_OWNED_ANNOTATION]: on ? 'true' : null },
        },
      },
      'merge',
      // Few retries, short timeouts: the reconcile loop tries again, and must not stall the
      // fail-safe. A write that reaches an API server whose etcd member is gone hangs; a Node
      // patch takes milliseconds, so after HEDGE_AFTER_MS the same patch (fixed values: sent
      // twice, it sets the same) goes out on a new connection, most likely to a healthy server.
      { retries: 2, timeoutMs: 3_000, hedgeAfterMs: HEDGE_AFTER_MS, ...(signal ? { signal } : {}) },
    );
  }

  async writeStatus(status: string): Promise<void> {
    const node = await this.ctx.client.patch<Node>(
      this.path,
      { metadata: { annotations: { [L2_STATE_ANNOTATION]: status } } },
      'merge',
      // No retries: awaited at the end of each reconcile, so a write hanging on a stale API
      // server would hold the next decision (the fail-safe's) for the retries' sum; the next
      // reconcile writes again (the status is published while the API answers).
      { timeoutMs: 3_000, hedgeAfterMs: HEDGE_AFTER_MS },
    );
    if (rv(node) > rv(this.current())) this.patched = node;
  }
}
