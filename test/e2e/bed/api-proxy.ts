// A TLS-terminating proxy between a client and the bed's real API server, holding the API
// server's own certificate (so clients verify it as usual). It records every request on the wire
// (what the API server is asked is what the cluster pays for), reads every watch stream
// (bookmarks, 410 ERROR events), and can misbehave as a network does: cut the watches (a dropped
// connection), black-hole every connection (sockets open, nothing forwarded: a NAT entry or load
// balancer flow gone without a FIN), or answer 429 with Retry-After (the next n requests, or every
// request of a kind until told to stop: the robustness suite's api-429 fault), or hold the requests
// of a kind a while before forwarding them (a slow API server).
import { readFileSync } from 'node:fs';
import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import type { ControlPlane } from '../../../lab/bed/control-plane.ts';
import { KubeClient, type KubeClientOptions } from '../../../shared/kube/client.ts';

export interface ProxiedCall {
  /** When it arrived (ms). */
  t: number;
  verb: 'LIST' | 'WATCH' | 'OTHER';
  /** The path and query as sent. */
  url: string;
  query: URLSearchParams;
  /** The API server's status, or 429 when the proxy answered; 0 until the answer. */
  status: number;
  /** BOOKMARK events in a watch's stream. */
  bookmarks: number;
  /** ERROR events with code 410 in a watch's stream. */
  gone: number;
  /** When the answer (a watch's stream) ended (ms); 0 while open. */
  ended: number;
}

export interface ApiProxyOptions {
  /**
   * Serve the API under this path, as Rancher's `/k8s/clusters/<id>` proxy does: a request under
   * it is forwarded without it; any other is answered 404.
   */
  pathPrefix?: string;
  /** Listen on this address (default 127.0.0.1): a lab node's namespace reaches the host's switch address. */
  host?: string;
}

export async function apiProxy(cp: ControlPlane, opts: ApiProxyOptions = {}) {
  const prefix = (opts.pathPrefix ?? '').replace(/\/+$/, '');
  const upstream = new URL(cp.server);
  const calls: ProxiedCall[] = [];
  const openWatches = new Set<ServerResponse>();
  const upstreams = new Set<ClientRequest>();
  const blackholes = new Set<() => void>();
  /** Which requests the proxy answers 429 itself (throttleNext, refuseWhere). */
  let refusing: { match: (req: IncomingMessage, url: URL) => boolean; retryAfter: string } | undefined;
  /** Which requests the proxy holds a while before forwarding them (delayWhere). */
  let delaying: { match: (url: URL) => boolean; ms: number } | undefined;

  const refuse = (req: IncomingMessage, res: ServerResponse, retryAfter: string) => {
    req.resume();
    res.writeHead(429, { 'retry-after': retryAfter, 'content-type': 'application/json' });
    res.end(
      JSON.stringify({ kind: 'Status', code: 429, reason: 'TooManyRequests', message: 'throttled by test' }),
    );
  };

  /** Counts a watch stream's bookmarks and 410s as they pass. */
  const readWatch = (call: ProxiedCall, ures: IncomingMessage) => {
    let buf = '';
    ures.setEncoding('utf8');
    ures.on('data', (chunk: string) => {
      buf += chunk;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!line.trim()) continue;
        const ev = JSON.parse(line) as { type: string; object?: { code?: number } };
        if (ev.type === 'BOOKMARK') call.bookmarks++;
        if (ev.type === 'ERROR' && ev.object?.code === 410) call.gone++;
      }
    });
  };

  const forward = (req: IncomingMessage, res: ServerResponse) => {
    if (prefix) {
      const raw = req.url ?? '/';
      if (!raw.startsWith(`${prefix}/`)) {
        req.resume();
        res.writeHead(404, { 'content-type': 'text/plain' });
        res.end(`404 page not found (this proxy serves the API under ${prefix}/)`);
        return;
      }
      req.url = raw.slice(prefix.length);
    }
    const url = new URL(req.url ?? '/', upstream);
    const watch = url.searchParams.get('watch') === '1';
    const call: ProxiedCall = {
      t: Date.now(),
      verb: req.method !== 'GET' ? 'OTHER' : watch ? 'WATCH' : 'LIST',
      url: req.url ?? '',
      query: url.searchParams,
      status: 0,
      bookmarks: 0,
      gone: 0,
      ended: 0,
    };
    res.on('close', () => {
      call.ended = Date.now();
    });
    calls.push(call);
    if (refusing?.match(req, url)) {
      call.status = 429;
      refuse(req, res, refusing.retryAfter);
      return;
    }
    if (delaying?.match(url)) {
      const ms = delaying.ms;
      // Paused meanwhile: the body waits in the socket, as it does for a slow server.
      req.pause();
      const timer = setTimeout(() => send(req, res, call, watch), ms);
      res.on('close', () => clearTimeout(timer));
      return;
    }
    send(req, res, call, watch);
  };

  const send = (req: IncomingMessage, res: ServerResponse, call: ProxiedCall, watch: boolean) => {
    const up = https.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        path: req.url,
        method: req.method,
        headers: req.headers,
        ca: cp.target.ca,
      },
      (ures) => {
        call.status = ures.statusCode ?? 0;
        res.writeHead(ures.statusCode ?? 502, ures.headers);
        // Sent now, as the API server sends them: node holds written headers back until the first
        // body byte, so a watch on a quiet resource looked unanswered to its client until an event
        // (the speakers' views stayed stale through the whole api-429 fault, issue 42 item 10).
        res.flushHeaders();
        ures.pipe(res);
        blackholes.add(() => {
          ures.unpipe(res);
          ures.pause();
        });
        if (!watch) return;
        openWatches.add(res);
        res.on('close', () => openWatches.delete(res));
        readWatch(call, ures);
      },
    );
    upstreams.add(up);
    up.on('close', () => upstreams.delete(up));
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  };

  const server = https.createServer(
    { cert: readFileSync(join(cp.dir, 'apiserver.crt')), key: readFileSync(join(cp.dir, 'apiserver.key')) },
    forward,
  );
  // Every socket, as accepted: closeAllConnections() would end only those the HTTP layer tracks, not
  // one still in its TLS handshake or taken over by an upgrade, and server.close() waits for all of them
  // (a robustness trial's api-429 lift waited about 600 s once).
  const sockets = new Set<Socket>();
  server.on('connection', (sock: Socket) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
  });
  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((r) => server.listen(0, host, r));
  const port = (server.address() as AddressInfo).port;
  const sum = (verb: ProxiedCall['verb'], f: (c: ProxiedCall) => number) =>
    calls.filter((c) => c.verb === verb).reduce((n, c) => n + f(c), 0);
  const proxyServer = `https://${host}:${port}${prefix}`;
  return {
    host,
    port,
    calls,
    /** The proxy's URL, with the path prefix when there is one. */
    server: proxyServer,
    /** A client of the API server through this proxy. */
    client: (opts: KubeClientOptions = {}) => new KubeClient({ ...cp.target, server: proxyServer }, opts),
    counts: () => ({
      lists: sum('LIST', () => 1),
      watches: sum('WATCH', (c) => (c.status === 200 ? 1 : 0)),
      gone: sum('WATCH', (c) => c.gone + (c.status === 410 ? 1 : 0)),
      bookmarks: sum('WATCH', (c) => c.bookmarks),
    }),
    /** Cuts every open watch mid-stream, as a dropped connection or a restarted proxy does. */
    cutWatches() {
      for (const res of openWatches) res.destroy();
    },
    /** Stops forwarding every answer in flight; both sockets stay open and silent. */
    blackhole() {
      for (const f of blackholes) f();
      blackholes.clear();
    },
    /**
     * Answers the next `n` requests itself (to `path` only, when given): 429 with Retry-After. A
     * path keeps a request written just before a client stopped (it may arrive after) from
     * taking an answer meant for the request under test.
     */
    throttleNext(n: number, retryAfterSeconds: number, path?: string) {
      let left = n;
      refusing = {
        match: (_req, url) => left > 0 && (path === undefined || url.pathname === path) && left-- > 0,
        retryAfter: String(retryAfterSeconds),
      };
    },
    /** Answers every request that `match` picks itself, 429 with Retry-After, until `stopRefusing`. */
    refuseWhere(match: (req: IncomingMessage) => boolean, retryAfterSeconds: number) {
      refusing = { match, retryAfter: String(retryAfterSeconds) };
    },
    stopRefusing() {
      refusing = undefined;
    },
    /** Holds every request that `match` picks `ms` before forwarding it, until `stopDelaying`. */
    delayWhere(match: (url: URL) => boolean, ms: number) {
      delaying = { match, ms };
    },
    stopDelaying() {
      delaying = undefined;
    },
    close: () =>
      new Promise<void>((r) => {
        // Black-holed streams hold their upstream sockets open: end them too.
        for (const up of upstreams) up.destroy();
        server.close(() => r());
        for (const sock of sockets) sock.destroy();
      }),
  };
}

export type ApiProxy = Awaited<ReturnType<typeof apiProxy>>;
