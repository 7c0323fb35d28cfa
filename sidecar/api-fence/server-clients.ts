// One API client per API server the fence asks directly (this node's own, from loopback, and the
// others), kept while the guard runs so their connections are reused.
import type { KubeClient } from '../../shared/kube/client.ts';
import { type ApiEndpoint, endpointText, probeSource } from './fence.ts';

export class ApiServerClients {
  private readonly clients = new Map<string, KubeClient>();
  private readonly client: KubeClient;
  private readonly nodeName: string;

  constructor(client: KubeClient, nodeName: string) {
    this.client = client;
    this.nodeName = nodeName;
  }

  /** The client for the API server at `e`: this node's own (`local`) or another host's. */
  at(e: ApiEndpoint, local: boolean): KubeClient {
    const key = `${local ? 'local' : 'other'} ${endpointText(e)}`;
    let client = this.clients.get(key);
    if (!client) {
      client = this.client.at(`https://${endpointText(e)}`, {
        userAgent: `drainguard-sidecar/${this.nodeName} (${local ? 'local' : 'another'} API server)`,
        // From loopback: the fence lets the local probe through.
        ...(local ? { localAddress: probeSource(e) } : {}),
      });
      this.clients.set(key, client);
    }
    return client;
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
  }
}
