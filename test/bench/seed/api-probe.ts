// The management cluster's API reads through the VIP, for make bench-seed: run in the client
// namespace, one GET of the drained Node every intervalMs on a new connection (as a client that
// reconnects), each answered or given up after timeoutMs. A GET of one object is a consistent read
// (etcd quorum), so a 200 comes only from an API server whose etcd is up to date.
//   node test/bench/seed/api-probe.ts '{"server","ca","token","node","intervalMs","timeoutMs"}'
// stdout: one JSON line per request {"t": start ms, "ms": duration, "code", "unschedulable"}.
import https from 'node:https';

interface Args {
  server: string;
  ca: string;
  token: string;
  node: string;
  intervalMs: number;
  timeoutMs: number;
}

const args = JSON.parse(process.argv[2] ?? '{}') as Args;
const url = new URL(`/api/v1/nodes/${args.node}`, args.server);

function once(): void {
  const t = Date.now();
  let said = false;
  const done = (code: number, unschedulable?: boolean) => {
    if (said) return;
    said = true;
    process.stdout.write(
      `${JSON.stringify({ t, ms: Date.now() - t, code, ...(unschedulable === undefined ? {} : { unschedulable }) })}\n`,
    );
  };
  const req = https.get(
    url,
    {
      ca: args.ca,
      headers: { authorization: `Bearer ${args.token}` },
      agent: false,
      timeout: args.timeoutMs,
    },
    (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        let unschedulable: boolean | undefined;
        try {
          unschedulable = Boolean(
            (JSON.parse(body) as { spec?: { unschedulable?: boolean } }).spec?.unschedulable,
          );
        } catch {}
        done(res.statusCode ?? 0, res.statusCode === 200 ? unschedulable : undefined);
      });
      res.on('error', () => done(0));
    },
  );
  req.on('timeout', () => req.destroy(new Error('timeout')));
  req.on('error', () => done(0));
}

setInterval(once, args.intervalMs);
once();
process.on('SIGTERM', () => process.exit(0));
