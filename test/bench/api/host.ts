// Many sidecars in one process (make bench-api): each is the product's own startSidecar() with
// its own environment as injected, so its own API client (own connections, user agent
// drainguard-sidecar/<node>), informers, features and HTTP port; only the process, the
// service-account files (/var/run/secrets/..., mounted by lab/bed/pod.ts) and the stubbed host
// tools are shared. Started by bench.ts through podAccess().wrap; argv[2] is a JSON file holding
// one environment per sidecar. Prints "ready <n>" on stderr once all are running; logs (JSON
// lines, each with its node) go to stdout.
import { readFileSync } from 'node:fs';
import { createLogger } from '../../../shared/log.ts';
import { startSidecar } from '../../../sidecar/main.ts';

const envs = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as Record<string, string>[];
const log = createLogger('drainguard-sidecar', 'info');
const running: Promise<unknown>[] = [];
// A few at a time, as a DaemonSet rollout would bring them up: not all lists in the same millisecond.
const AT_ONCE = 8;
for (let i = 0; i < envs.length; i += AT_ONCE) {
  const batch = envs
    .slice(i, i + AT_ONCE)
    .map((env) => startSidecar({ ...process.env, ...env }, log.child({ node: env.DRAINGUARD_NODE_NAME })));
  running.push(...batch);
  await Promise.all(batch);
}
process.stderr.write(`ready ${running.length}\n`);
// Stopped by SIGTERM/SIGKILL from bench.ts: connections close with the process.
process.once('SIGTERM', () => process.exit(0));
setInterval(() => {}, 1 << 30);
