import type { Logger } from '../log.ts';
import type { KubeClient } from './client.ts';
import type { KubeObject } from './types.ts';

export interface EventTarget {
  kind: 'Node' | 'Pod' | string;
  name: string;
  namespace?: string;
  uid?: string;
  apiVersion?: string;
}

/**
 * Records a core/v1 Event. Events are best-effort: a failure is logged and swallowed so
 * that reporting never blocks the work being reported.
 */
export class EventRecorder {
  private readonly client: KubeClient;
  private readonly component: string;
  private readonly host: string;
  private readonly log: Logger;
  constructor(client: KubeClient, component: string, host: string, log: Logger) {
    this.client = client;
    this.component = component;
    this.host = host;
    this.log = log;
  }

  async record(
    target: EventTarget,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ): Promise<void> {
    // Node events live in "default", as kubelet and kubectl expect.
    const ns = target.namespace || 'default';
    const now = new Date().toISOString();
    const body: KubeObject = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { generateName: `${target.name}.drainguard.`, namespace: ns } as KubeObject['metadata'],
      involvedObject: {
        kind: target.kind,
        name: target.name,
        ...(target.namespace ? { namespace: target.namespace } : {}),
        ...(target.uid ? { uid: target.uid } : {}),
        apiVersion: target.apiVersion ?? 'v1',
      },
      reason,
      message: message.slice(0, 1024),
      type,
      source: { component: this.component, host: this.host },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    this.log.info({ event: { kind: target.kind, name: target.name, reason, type } }, message);
    try {
      await this.client.create(`/api/v1/namespaces/${ns}/events`, body, { retries: 2, timeoutMs: 5_000 });
    } catch (e) {
      this.log.warn({ err: (e as Error).message, reason }, 'could not record Event');
    }
  }
}
