// How a client reaches the API server and proves who it is: its own module, so that client.ts and
// the two sources of it (in-cluster.ts, kubeconfig.ts) import it without importing each other.
import type { Agent } from 'node:http';

/**
 * How requests reach the API server and prove who they are. apply() runs before every request
 * and watch, so credentials that expire (exec plugins, rotated token files) are fetched again.
 */
export interface KubeAuth {
  readonly server: string;
  /** Names the credentials in errors, e.g. `context "prod" (user "admin")`; never their secrets. */
  readonly describe?: string;
  apply(): Promise<{ agent: Agent; headers: Record<string, string> }>;
  /**
   * After a 401 for the request sent with these headers: drop the cached credential so the next
   * apply() fetches a new one (exec plugins), unless it was replaced since.
   */
  refresh?(sent: Record<string, string>): void;
  close(): void;
}
