// The status annotation (drainguard.io/l2-handover) published on the own Node in the background,
// the latest status winning: a write that hangs on a stale API server (3 s, both hedged copies)
// must never hold the next decision — the fail-safe's among them (bench-seed run 7: the cut came
// 4.5 s late behind one). Nothing is written while the API is down, or what the Node already says.

import { L2_STATE_ANNOTATION } from '../../shared/names.ts';
import type { FeatureContext } from '../feature.ts';
import type { OwnNode } from './own-node.ts';

/** The status to publish, rendered, and whether the handover is idle (an idle node needs none). */
export type RenderStatus = () => { status: string; idle: boolean };

export class StatusPublisher {
  private readonly ctx: FeatureContext;
  private readonly node: OwnNode;
  private readonly render: RenderStatus;
  private readonly stopped: () => boolean;
  private written = '';
  /** The write in flight, and whether the status changed since it began. */
  private writing: Promise<void> | undefined;
  private changed = false;

  constructor(ctx: FeatureContext, node: OwnNode, render: RenderStatus, stopped: () => boolean) {
    this.ctx = ctx;
    this.node = node;
    this.render = render;
    this.stopped = stopped;
  }

  /** Publishes the current status; returns at once. */
  publish(): void {
    if (this.writing) {
      this.changed = true;
      return;
    }
    this.writing = (async () => {
      do {
        this.changed = false;
        await this.write();
      } while (this.changed && !this.stopped());
    })().finally(() => {
      this.writing = undefined;
    });
  }

  /** Resolves when no write is in flight. */
  async idle(): Promise<void> {
    await this.writing;
  }

  private async write(): Promise<void> {
    const { ctx } = this;
    const { status, idle } = this.render();
    if (status === this.written || !ctx.api.up) return;
    const onNode = this.node.current()?.metadata?.annotations?.[L2_STATE_ANNOTATION];
    if (onNode === status) {
      this.written = status;
      return;
    }
    // An idle node with no annotation needs none.
    if (onNode === undefined && idle) {
      this.written = status;
      return;
    }
    try {
      await this.node.writeStatus(status);
      this.written = status;
    } catch (e) {
      ctx.log.warn({ err: (e as Error).message }, 'could not write the L2 status annotation; will retry');
    }
  }
}
