// A stand-in for a kube-apiserver whose etcd member was removed, as far as a client can tell
// (measured on kube-apiserver 1.20.2, docs/lab-cluster.md, "What an API server answers once its
// etcd member is removed"): it accepts TLS connections and holds every request — a consistent read
// gets no answer, an open watch stays silent. With the file named by `healthyFlag` present it
// answers every GET at once with `{}` (its etcd back). Used where a whole HA control plane is not
// needed (test/e2e/l2/stale-api.test.ts); the HA lab runs the real thing.
//   node lab/sim/stale-api-server.ts '{"address":"…","port":6443,"cert":"…","key":"…","healthyFlag":"…"}'
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:https';

const o = JSON.parse(process.argv[2] ?? '{}') as {
  address: string;
  port: number;
  cert: string;
  key: string;
  healthyFlag: string;
};
const server = createServer({ cert: readFileSync(o.cert), key: readFileSync(o.key) }, (req, res) => {
  if (existsSync(o.healthyFlag)) {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    return;
  }
  // Held: nothing is ever written.
  req.resume();
});
server.keepAliveTimeout = 0;
server.requestTimeout = 0;
server.headersTimeout = 0;
server.listen(o.port, o.address, () => process.stdout.write('listening\n'));
