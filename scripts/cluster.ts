// `make cluster` / `make cluster-down`: the lab cluster (lab/cluster) for people, state in .cluster/.
// `up` prints KUBECONFIG=<absolute path> as its last line (CONTROL_PLANES=N: an HA control plane on
// nodes cp-1..cp-N, lab/cluster/ha-control-plane.ts); `down` removes every process, namespace,
// route, mount and cgroup it made, and says if anything is left.
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { pidAlive } from '../lab/bed/proc.ts';
import { startCluster, stopClusterFromState } from '../lab/cluster/cluster.ts';
import { type ClusterState, leftovers } from '../lab/cluster/teardown.ts';

const dir = resolve(import.meta.dirname, '..', '.cluster');
const stateFile = `${dir}/cluster.json`;
const say = (line: string) => process.stdout.write(`${line}\n`);

function down(): void {
  if (!existsSync(stateFile)) {
    say('no cluster running (no .cluster/cluster.json)');
    return;
  }
  const st = stopClusterFromState(dir) as ClusterState;
  const left = leftovers(st);
  rmSync(dir, { recursive: true, force: true });
  if (left.length > 0) {
    say(`stopped, but these are left:\n  ${left.join('\n  ')}`);
    process.exitCode = 1;
  } else say(`stopped: ${st.pids.length} processes, ${st.netns.length} namespaces, all removed`);
}

/** CONTROL_PLANES (make cluster CONTROL_PLANES=3): how many control-plane nodes; 1 is today's lab. */
function controlPlanes(value: string | undefined): number {
  if (value === undefined || value === '') return 1;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 7)
    throw new Error(
      `CONTROL_PLANES=${value}: expected a whole number from 1 to 7 (1: one API server, no control-plane nodes)`,
    );
  return n;
}

async function up(): Promise<void> {
  if (existsSync(stateFile)) {
    const st = JSON.parse(readFileSync(stateFile, 'utf8')) as ClusterState;
    if (st.pids.some(pidAlive)) {
      say(`already running; make cluster-down first\nKUBECONFIG=${st.cpDir}/kubeconfig.json`);
      return;
    }
    stopClusterFromState(dir);
  }
  const cluster = await startCluster({
    dir,
    detached: true,
    controlPlanes: controlPlanes(process.env.CONTROL_PLANES),
    log: (l) => process.stderr.write(`[cluster] ${l}\n`),
  });
  say(await cluster.k(['get', 'nodes', '-o', 'wide']));
  const servers = cluster.ha
    ? cluster.ha.members.map((m) => `${m.name} ${m.server}`).join(', ')
    : cluster.server;
  say(`API server${cluster.ha ? 's' : ''} ${servers}; logs and state in ${dir}`);
  say(`KUBECONFIG=${cluster.kubeconfigPath}`);
}

const cmd = process.argv[2];
if (cmd === 'up') await up();
else if (cmd === 'down') down();
else {
  process.stderr.write('usage: node scripts/cluster.ts up|down\n');
  process.exitCode = 2;
}
