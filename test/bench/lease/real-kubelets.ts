// The leaderless window at `kubectl drain` of the leader's node, on real kubelets (lab cluster):
// two skupper sites, one injected (drainguard hands the Lease over) and one not (the Lease is left
// to expire: 15 s / 10 s / 2 s as skupper sets them). Trials alternate between the sites; each
// drains the node of the current leader (only that site's pods: --pod-selector), measures from
// the old leader's exit ("stopped-leading", its own clock) to the next holder's first leader work
// ("leading"), uncordons and waits for the replacement pod. Same machine, same clock.
import { type Cluster, startCluster } from '../../../lab/cluster/cluster.ts';
import { installDrainguard } from '../../../lab/cluster/install.ts';
import { installSkupperSite, leaderChange, siteLeader } from '../../../lab/cluster/skupper.ts';

export interface RealTrial {
  mode: 'drainguard' | 'baseline';
  leaderlessMs: number;
  splitBrain: number;
}

async function trial(c: Cluster, ns: string, mode: RealTrial['mode']): Promise<RealTrial> {
  const leader = await siteLeader(c, ns);
  const w = await leaderChange(c, ns, leader.metadata.name, async () => {
    await c.k([
      'drain',
      leader.spec.nodeName,
      '--ignore-daemonsets',
      '--delete-emptydir-data',
      `--pod-selector=lab.drainguard.io/site=${ns}`,
      '--timeout=180s',
    ]);
  });
  await c.k(['uncordon', leader.spec.nodeName]);
  await c.k(['rollout', 'status', '-n', ns, 'deployment/skupper-router', '--timeout=180s']);
  return { mode, leaderlessMs: w.leadingAt - w.stoppedAt, splitBrain: w.leadingAt < w.stoppedAt ? 1 : 0 };
}

/** `trials` drains per mode on one lab cluster; `report` gets each trial as it ends. */
export async function realKubeletTrials(
  trials: number,
  report: (t: RealTrial) => void,
  note: (line: string) => void,
): Promise<RealTrial[]> {
  const c = await startCluster({ log: (l) => note(`cluster: ${l}`) });
  try {
    await installDrainguard(c);
    await installSkupperSite(c, 'site-dg', { inject: true });
    await installSkupperSite(c, 'site-bl', { inject: false });
    const out: RealTrial[] = [];
    for (let i = 0; i < trials; i++)
      for (const [ns, mode] of [
        ['site-dg', 'drainguard'],
        ['site-bl', 'baseline'],
      ] as const) {
        const t = await trial(c, ns, mode);
        report(t);
        out.push(t);
      }
    return out;
  } finally {
    await c.stop();
  }
}
