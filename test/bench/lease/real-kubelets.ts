// The leaderless window at `kubectl drain` of the leader's node, on real kubelets (lab cluster):
// two skupper sites, one injected (drainguard hands the Lease over) and one not (the Lease is left
// to expire: 15 s / 10 s / 2 s as skupper sets them). Trials alternate between the sites; each
// drains the node of the current leader (only that site's pods: --pod-selector), measures from
// the old leader's exit ("stopped-leading", its own clock) to the next holder's first leader work
// ("leading"), uncordons and waits for the replacement pod. Same machine, same clock.
import { type Cluster, startCluster } from '../../../lab/cluster/cluster.ts';
import { installDrainguard } from '../../../lab/cluster/install.ts';
import { followEvents } from '../../../lab/cluster/logs.ts';
import { installSkupperSite, SKUPPER_LEASE } from '../../../lab/cluster/skupper.ts';
import { waitFor } from '../../../shared/clock.ts';

interface Ev {
  ev: string;
  t: number;
}
export interface RealTrial {
  mode: 'drainguard' | 'baseline';
  leaderlessMs: number;
  splitBrain: number;
}

const T = { timeoutMs: 180_000, intervalMs: 100 };

async function trial(c: Cluster, ns: string, mode: RealTrial['mode']): Promise<RealTrial> {
  const k = (args: string[]) => c.k(args);
  const pods = (
    JSON.parse(await k(['get', 'pods', '-n', ns, '-l', `lab.drainguard.io/site=${ns}`, '-o', 'json'])) as {
      items: { metadata: { name: string; deletionTimestamp?: string }; spec: { nodeName: string } }[];
    }
  ).items.filter((p) => !p.metadata.deletionTimestamp);
  const holder = async () =>
    (
      JSON.parse(await k(['get', 'lease', '-n', ns, SKUPPER_LEASE, '-o', 'json'])) as {
        spec?: { holderIdentity?: string };
      }
    ).spec?.holderIdentity;
  const leaderName = await waitFor(
    'a holder among the pods',
    async () => {
      const h = await holder();
      return pods.some((p) => p.metadata.name === h) ? h : undefined;
    },
    T,
  );
  const leader = pods.find((p) => p.metadata.name === leaderName)!;
  const oldLog = followEvents<Ev>(c, ns, leader.metadata.name, 'kube-adaptor');
  const logs = [oldLog];
  try {
    await waitFor('log stream open', () => oldLog.lines.length > 0, T);
    const from = Date.now();
    await k([
      'drain',
      leader.spec.nodeName,
      '--ignore-daemonsets',
      '--delete-emptydir-data',
      `--pod-selector=lab.drainguard.io/site=${ns}`,
      '--timeout=180s',
    ]);
    const stopped = await waitFor(
      'the old leader stopped',
      () => oldLog.events.find((e) => e.ev === 'stopped-leading' && e.t >= from),
      T,
    );
    // Whoever leads next: the other replica, or (Lease left to expire) the ReplicaSet's
    // replacement if it came up in time and asked first.
    const next = await waitFor(
      'a new holder',
      async () => {
        const h = await holder();
        return h && h !== leaderName ? h : undefined;
      },
      T,
    );
    const newLog = followEvents<Ev>(c, ns, next, 'kube-adaptor');
    logs.push(newLog);
    const started = await waitFor(
      'the new holder leads',
      () => newLog.events.find((e) => e.ev === 'leading' && e.t >= from),
      T,
    );
    await k(['uncordon', leader.spec.nodeName]);
    await k(['rollout', 'status', '-n', ns, 'deployment/skupper-router', '--timeout=180s']);
    return { mode, leaderlessMs: started.t - stopped.t, splitBrain: started.t < stopped.t ? 1 : 0 };
  } finally {
    for (const l of logs) l.proc.kill();
  }
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
