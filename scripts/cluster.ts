// `make cluster` / `make cluster-down`: a local etcd + kube-apiserver for people, in .cluster/.
// `up` prints KUBECONFIG=<absolute path> as its last line; `down` stops exactly the pids it started.
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { startControlPlane } from '../lab/control-plane.ts';
import { killAndWait, pidAlive } from '../lab/proc.ts';

const dir = resolve(import.meta.dirname, '..', '.cluster');
const pidsFile = `${dir}/pids.json`;

async function down(): Promise<void> {
  if (!existsSync(pidsFile)) {
    process.stdout.write('no cluster running (no .cluster/pids.json)\n');
    return;
  }
  const st = JSON.parse(readFileSync(pidsFile, 'utf8')) as { etcd?: number; apiserver?: number };
  for (const pid of [st.apiserver, st.etcd]) await killAndWait(pid);
  rmSync(dir, { recursive: true, force: true });
  process.stdout.write(`stopped kube-apiserver (pid ${st.apiserver}) and etcd (pid ${st.etcd})\n`);
}

async function up(): Promise<void> {
  if (existsSync(pidsFile)) {
    const st = JSON.parse(readFileSync(pidsFile, 'utf8')) as { apiserver?: number };
    if (st.apiserver && pidAlive(st.apiserver)) {
      process.stdout.write(
        `already running (pid ${st.apiserver}); make cluster-down first\nKUBECONFIG=${dir}/kubeconfig.json\n`,
      );
      return;
    }
    rmSync(dir, { recursive: true, force: true });
  }
  const cp = await startControlPlane({ dir, detached: true });
  process.stdout.write(
    `kube-apiserver ${cp.server} (pid ${cp.apiserverPid}), etcd (pid ${cp.etcdPid}); logs in ${dir}\n`,
  );
  process.stdout.write(`KUBECONFIG=${cp.kubeconfigPath}\n`);
}

const cmd = process.argv[2];
if (cmd === 'up') await up();
else if (cmd === 'down') await down();
else {
  process.stderr.write('usage: node scripts/cluster.ts up|down\n');
  process.exitCode = 2;
}
