import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../shared/log.ts';
import type { Registry } from '../shared/metrics.ts';
import { nodeHttp } from '../shared/node-http.ts';

/** Blocks until the features' pre-stop work is done or their budget is spent. */
export type PrestopHandler = () => Promise<Record<string, unknown>>;

export interface SidecarServerOptions {
  port: number;
  host: string;
  log: Logger;
  metrics: Registry;
  /** Ready = configured and running. Never "the API is healthy": API trouble must not make the pod NotReady. */
  ready: () => boolean;
  /** Undefined for profiles that get no preStop hook: /prestop is not served at all. */
  prestop?: PrestopHandler;
  /**
   * `all` (default): the four endpoints. `metrics`: /metrics and nothing else — the listener on a
   * hostNetwork node's IP, which any pod and host on the network can reach.
   */
  serves?: 'all' | 'metrics';
}

/**
 * The sidecar's four endpoints on plain node:http: it runs on every node, so it carries no
 * web framework (footprint). /prestop is meant for the kubelet on 127.0.0.1 only; on the host
 * network a second server, on the node's IP, serves /metrics alone.
 */
export class SidecarServer {
  private readonly server: Server;
  private readonly opts: SidecarServerOptions;

  constructor(opts: SidecarServerOptions) {
    this.opts = opts;
    this.server = nodeHttp.createServer((req, res) => {
      this.handle(req, res).catch((e: unknown) => {
        opts.log.error({ err: (e as Error).message, url: req.url }, 'handler failed');
        if (!res.headersSent) this.send(res, 500, { error: 'internal error' });
      });
    });
    this.server.keepAliveTimeout = 5_000;
  }

  private send(res: ServerResponse, code: number, body: unknown, type = 'application/json'): void {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    res.writeHead(code, { 'content-type': type, 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // Kubelets before 1.26 (kubernetes#86139, ConsistentHTTPGetHandlers) build a preStop httpGet
    // URL as `http://host:port/` + path: `/prestop` arrives as `//prestop` (lab kubelet 1.20).
    const path = (req.url ?? '/').split('?')[0]?.replace(/^\/+/, '/');
    req.resume();
    if (this.opts.serves === 'metrics' && path !== '/metrics')
      return this.send(res, 404, {
        error: `no route ${path}: only /metrics is served on this address; the other routes are on 127.0.0.1`,
      });
    switch (path) {
      case '/healthz':
        return this.send(res, 200, { ok: true });
      case '/readyz':
        return this.opts.ready()
          ? this.send(res, 200, { ready: true })
          : this.send(res, 503, { ready: false });
      case '/metrics':
        return this.send(res, 200, this.opts.metrics.render(), 'text/plain; version=0.0.4');
      case '/prestop': {
        // Not a door left open for any pod on the network to spend the handover through.
        if (!this.opts.prestop)
          return this.send(res, 404, {
            error: 'no /prestop for this profile: no preStop hook is injected for it',
          });
        if (req.method !== 'GET' && req.method !== 'POST')
          return this.send(res, 405, { error: 'use GET or POST' });
        this.opts.log.info('prestop called');
        const summary = await this.opts.prestop();
        return this.send(res, 200, summary);
      }
      default:
        return this.send(res, 404, {
          error: `no route ${path}; routes are /healthz /readyz /prestop /metrics`,
        });
    }
  }

  listen(): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.opts.port, this.opts.host, () => resolve(this.server.address() as AddressInfo));
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
