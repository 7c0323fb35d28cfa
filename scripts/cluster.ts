// `make cluster` / `make cluster-down`: the lab cluster (lab/cluster) for people, state in .cluster/.
// `up` prints KUBECONFIG=<absolute path> as its last line; `down` removes every process, namespace,
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
    log: (l) => process.stderr.write(`[cluster] ${l}\n`),
  });
  say(await cluster.k(['get', 'nodes', '-o', 'wide']));
  say(`API server ${cluster.server}; logs and state in ${dir}`);
  say(`KUBECONFIG=${cluster.kubeconfigPath}`);
}

const cmd = process.argv[2];
if (cmd === 'up') await up();
else if (cmd === 'down') down();
else {
  process.stderr.write('usage: node scripts/cluster.ts up|down\n');
  process.exitCode = 2;
}
