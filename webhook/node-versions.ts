// What --sidecar-mode auto decides by: the kubelet version of every node (a list + watch of Nodes)
// and the API server's version (read once at start).
import type { KubeClient } from '../shared/kube/client.ts';
import { Informer } from '../shared/kube/informer.ts';
import type { KubeObject, Node } from '../shared/kube/types.ts';
import type { Logger } from '../shared/log.ts';

/** kubeletVersion by node name ('' when a node does not report one). */
export function kubeletVersions(nodes: Iterable<KubeObject>): Map<string, string> {
  const out = new Map<string, string>();
  for (const o of nodes) {
    const n = o as Node;
    if (n.metadata?.name) out.set(n.metadata.name, n.status?.nodeInfo?.kubeletVersion ?? '');
  }
  return out;
}

export class NodeVersions {
  private readonly client: KubeClient;
  private readonly log: Logger;
  private readonly informer: Informer;
  private kubelets: Map<string, string> | undefined;
  private apiServerVersion: string | undefined;

  constructor(client: KubeClient, log: Logger) {
    this.client = client;
    this.log = log;
    this.informer = new Informer(client, {
      path: '/api/v1/nodes',
      log,
      onChange: (objects) => {
        this.kubelets = kubeletVersions(objects.values());
      },
    });
  }

  /** Reads the API server's version (unknown if that fails: the kubelets decide) and starts the watch. */
  async start(): Promise<void> {
    try {
      this.apiServerVersion = (
        await this.client.get<{ gitVersion?: string }>('/version', { retries: 3 })
      ).gitVersion;
    } catch (e) {
      this.log.warn(
        { err: (e as Error).message },
        'API server version unknown; deciding by kubelet versions only',
      );
    }
    this.informer.start();
  }

  /** undefined until the first list of Nodes arrived. */
  get kubeletVersions(): ReadonlyMap<string, string> | undefined {
    return this.kubelets;
  }
  get apiServer(): string | undefined {
    return this.apiServerVersion;
  }
  get synced(): boolean {
    return this.informer.hasSynced;
  }

  stop(): Promise<void> {
    return this.informer.stop();
  }
}
