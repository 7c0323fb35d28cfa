// The seed sequence (issue 23) on a fresh HA lab cluster, measured from a client namespace: what
// make bench-seed runs twice (test/bench/seed/seed.ts) and the lab-cluster lane runs once with
// drainguard (test/e2e/cluster/ha-seed.test.ts). The steps and figures are described in seed.ts.
import type { ChildProcess } from 'node:child_process';
import { cpSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import {
  macsIn,
  type ProbeRound,
  probeRounds,
  startArpProbe,
  stopProcess,
} from '../../../lab/bed/arp-probe.ts';
import { installApiVip, vipKubeconfig } from '../../../lab/cluster/api-vip.ts';
import { type Cluster, startCluster } from '../../../lab/cluster/cluster.ts';
import { leaderOf, memberList, memberRemove, moveLeader } from '../../../lab/cluster/etcd-cluster.ts';
import { API_PORT, type ControlPlaneMember } from '../../../lab/cluster/ha-control-plane.ts';
import { installDrainguard, installMetalLbBase, webhookRolledOut } from '../../../lab/cluster/install.ts';
import { installSpeakers } from '../../../lab/cluster/metallb.ts';
import { kubectlBinary } from '../../../lab/versions.ts';
import { waitFor } from '../../../shared/clock.ts';
import { type ApiRead, type SeedFigures, seedFigures } from './figures.ts';
import { sidecarTimeline } from './sidecar-log.ts';

const ARP_INTERVAL_MS = 50;
const API_INTERVAL_MS = 100;
const PROBE = new URL('./api-probe.ts', import.meta.url).pathname;
const T = { timeoutMs: 180_000, intervalMs: 250 };

export interface SeedOptions {
  /** drainguard installed and injected into the speakers; false: the baseline. */
  inject: boolean;
  /** From the member's removal to the node going away (its link down). */
  goneAfterS: number;
  /** Watching after the node went away. */
  watchS: number;
  /** The member removed once `kubectl drain` returned (default), or as soon as the cordon is in. */
  removeAt?: 'drained' | 'cordoned';
  /**
   * `drained`: etcd's leadership moved to the drained node's member before the drain, so its
   * removal also costs an election (every API server waits for it). Default: wherever it is.
   */
  etcdLeader?: 'drained' | 'any';
  note(line: string): void;
}

export interface Pass extends SeedFigures {
  drained: string;
  new_owner: string | null;
  drain_s: number;
  drain_code: number;
  removed_at_s: number;
  /** Whether the removed member led etcd when the drain began (null: not known). */
  removed_leader: boolean | null;
  gone_at_s: number;
}

export async function runSeed(opts: SeedOptions): Promise<Pass> {
  const { inject, note } = opts;
  const c = await startCluster({
    controlPlanes: 3,
    nodes: ['node-a'],
    clients: ['client'],
    log: (l) => note(`${inject ? 'drainguard' : 'baseline'}: ${l}`),
  });
  const procs: ChildProcess[] = [];
  try {
    const ha = c.ha as NonNullable<Cluster['ha']>;
    await installMetalLbBase(c);
    if (inject) {
      await installDrainguard(c);
      // The webhook on the worker: the drain then evicts nothing and returns at once, so the
      // member removal follows the cordon within ~0.1 s in every run (the hard case: the
      // handover's writes race the removal).
      await c.k([
        'patch',
        'deployment',
        '-n',
        'drainguard-system',
        'drainguard-webhook',
        '-p',
        JSON.stringify({
          spec: { template: { spec: { nodeSelector: { 'kubernetes.io/hostname': 'node-a' } } } },
        }),
      ]);
      await webhookRolledOut(c);
    }
    await installSpeakers(c, { inject });
    await installApiVip(c);
    const client = c.bed.node('client');
    const byMac = new Map(ha.members.map((m) => [m.node.mac.toLowerCase(), m]));
    // One owner, the same after a few seconds of quiet (so the sidecars, when injected, are past
    // their start): a VIP still settling among the speakers would have the wrong node drained
    // (a baseline once drained cp-2 while cp-1 took the VIP: no failure to show).
    let owner: ControlPlaneMember | undefined;
    const answering = async () => {
      const macs = macsIn(await probeRounds(client, ha.apiVip, 6, ARP_INTERVAL_MS));
      return macs.length === 1 ? byMac.get(macs[0] as string) : undefined;
    };
    await waitFor(
      `one control-plane node answers ARP for ${ha.apiVip}, the same 3 s later`,
      async () => {
        const first = await answering();
        if (!first) return false;
        await new Promise((r) => setTimeout(r, 3_000));
        owner = await answering();
        return owner === first;
      },
      T,
    );
    const drained = owner as ControlPlaneMember;
    const healthy = ha.members.find((m) => m !== drained) as ControlPlaneMember;
    note(`${inject ? 'drainguard' : 'baseline'}: ${drained.name} owns ${ha.apiVip}`);

    const rounds: ProbeRound[] = [];
    procs.push(startArpProbe(client, ha.apiVip, ARP_INTERVAL_MS, (r) => rounds.push(r)));
    const reads: ApiRead[] = [];
    const directReads: ApiRead[] = [];
    const probeApi = (server: string, into: ApiRead[]) => {
      const probe = client.spawn(
        [
          process.execPath,
          PROBE,
          JSON.stringify({
            server,
            ca: ha.target.ca,
            token: ha.target.token,
            node: drained.name,
            intervalMs: API_INTERVAL_MS,
            timeoutMs: 5_000,
          }),
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      procs.push(probe);
      createInterface({ input: probe.stdout! }).on('line', (l) => {
        try {
          into.push(JSON.parse(l) as ApiRead);
        } catch {}
      });
    };
    probeApi(`https://${ha.apiVip}:${API_PORT}`, reads);
    // A node that stays, by its own address: what the API itself allowed (an etcd election).
    probeApi(healthy.server, directReads);
    await waitFor('the probes run', () => rounds.length > 5 && reads.length > 5, T);

    const members = await memberList(healthy.etcdClientURL);
    const id = members.find((m) => m.name === drained.name)?.id as string;
    if (opts.etcdLeader === 'drained') {
      const leaderId = await leaderOf(healthy.etcdClientURL);
      const leader = members.find((m) => m.id === leaderId);
      const at = ha.members.find((m) => m.name === leader?.name)?.etcdClientURL;
      if (leader && leader.id !== id && at) await moveLeader(at, id);
      await waitFor(
        `${drained.name}'s etcd member leads`,
        async () => (await leaderOf(healthy.etcdClientURL).catch(() => '')) === id,
        T,
      );
      // Right after the move an API server's writes may still fail ("transport is closing"):
      // the drain starts once every one of them has written.
      await waitFor(
        'a write through every API server after the leader moved',
        async () => {
          const stamp = `lab.drainguard.io/seed-probe=${Date.now()}`;
          const r = await Promise.all(
            ha.members.map((m) => m.kubectl(['annotate', 'namespace', 'default', stamp, '--overwrite'])),
          );
          return r.every((x) => x.code === 0);
        },
        T,
      );
    }

    // Read before the drain: a request between the cordon and the removal would delay the racing
    // order's removal.
    const removedLeader = await leaderOf(healthy.etcdClientURL)
      .then((l) => l === id)
      .catch(() => null);

    // 1. The drain, through the VIP, as Cluster API does it.
    const from = Date.now();
    const kubeconfig = vipKubeconfig(c);
    const draining = client.exec(
      [
        kubectlBinary(),
        '--kubeconfig',
        kubeconfig,
        'drain',
        drained.name,
        '--ignore-daemonsets',
        '--delete-emptydir-data',
        '--force',
        '--timeout=60s',
      ],
      { timeoutMs: 90_000 },
    );
    if (opts.removeAt === 'cordoned') {
      // The adversarial order: the member goes as soon as the cordon is in, while the handover runs.
      const hc = healthy.client();
      await waitFor(
        `${drained.name} cordoned`,
        async () =>
          (await hc.get<{ spec?: { unschedulable?: boolean } }>(`/api/v1/nodes/${drained.name}`)).spec
            ?.unschedulable === true,
        { timeoutMs: 30_000, intervalMs: 10 },
      ).finally(() => hc.close());
    } else await draining;
    // 2. At once, its etcd member removed (through a healthy member).
    await memberRemove(healthy.etcdClientURL, id);
    const removedAt = Date.now();
    const drain = await draining;
    const drainS = (Date.now() - from) / 1000;
    note(`drain: ${drain.code} in ${drainS.toFixed(1)} s ${drain.stderr.trim().split('\n').pop() ?? ''}`);
    // 3. After a while the node goes away.
    await new Promise((r) => setTimeout(r, opts.goneAfterS * 1000));
    await drained.node.run(['ip', 'link', 'set', 'eth0', 'down']);
    const goneAt = Date.now();
    await new Promise((r) => setTimeout(r, opts.watchS * 1000));
    const to = Date.now();
    for (const p of procs) await stopProcess(p, 'SIGKILL');
    // The drained node's container logs (speaker, sidecar), read from its disk: its link is down.
    const logs = join(
      tmpdir(),
      `drainguard-seed-${inject ? 'drainguard' : 'baseline'}-${opts.removeAt ?? 'drained'}-logs`,
    );
    rmSync(logs, { recursive: true, force: true });
    cpSync(join(c.dir, drained.name, 'pod-logs'), logs, { recursive: true });
    // With LAB_APISERVER_V, the API servers' request logs too: which server answered whom, when.
    if (process.env.LAB_APISERVER_V && c.ha)
      for (const m of c.ha.members)
        cpSync(join(c.cp.dir, `apiserver-${m.name}.log`), join(logs, `apiserver-${m.name}.log`));
    note(
      `${inject ? 'drainguard' : 'baseline'}: ${drained.name}'s pod logs in ${logs} (drain at ${new Date(from).toISOString()})`,
    );
    if (inject) for (const l of sidecarTimeline(logs, from)) note(`${drained.name} sidecar: ${l}`);
    const figures = seedFigures({
      rounds,
      reads,
      intervalMs: ARP_INTERVAL_MS,
      from,
      to,
      drainedMac: drained.node.mac.toLowerCase(),
      removedAt,
      directReads,
    });
    const last = figures.owners[figures.owners.length - 1]?.[1] ?? [];
    const newOwner = last.length === 1 ? (byMac.get(last[0] as string)?.name ?? last[0]) : null;
    return {
      drained: drained.name,
      new_owner: newOwner ?? null,
      drain_s: Math.round(drainS * 1000) / 1000,
      drain_code: drain.code,
      removed_at_s: Math.round(removedAt - from) / 1000,
      removed_leader: removedLeader,
      gone_at_s: Math.round(goneAt - from) / 1000,
      ...figures,
      owners: figures.owners.map(([s, macs]) => [s, macs.map((m) => byMac.get(m)?.name ?? m)]),
    };
  } finally {
    for (const p of procs) await stopProcess(p, 'SIGKILL').catch(() => {});
    await c.stop();
  }
}
