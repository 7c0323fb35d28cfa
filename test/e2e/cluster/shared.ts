// One lab cluster for every cluster suite (cluster.test.ts runs them in one process): starting
// it and installing MetalLB's base and drainguard from manifests/ costs about a minute, so it is
// done once. Each suite leaves the nodes uncordoned and removes what would get in the next
// one's way.
import { type Cluster, startCluster } from '../../../lab/cluster/cluster.ts';
import { installDrainguard, installMetalLbBase } from '../../../lab/cluster/install.ts';

let started: Promise<Cluster> | undefined;
let install: Promise<void> | undefined;

/** The cluster, started on first use (with a client namespace on the switch for ARP probes). */
export function cluster(): Promise<Cluster> {
  started ??= startCluster({ clients: ['client'], log: (l) => process.stdout.write(`# cluster: ${l}\n`) });
  return started;
}

/** MetalLB's namespace, CRD and RBAC, then drainguard from the user's overlay: once. */
export function installed(c: Cluster): Promise<void> {
  install ??= (async () => {
    // MetalLB is installed first, as on a user's cluster, then drainguard from manifests/.
    await installMetalLbBase(c);
    await installDrainguard(c);
  })();
  return install;
}

export async function stopCluster(): Promise<void> {
  const c = await started?.catch(() => undefined);
  await c?.stop();
}
