// make bench-seed: the sequence of the report drainguard was written for (issue 23), on the HA
// lab with real parts — three control-plane nodes, each with an etcd member and an API server its
// own kubelet, kube-proxy and pods use; the API VIP served by MetalLB L2 (the speaker simulator)
// with `externalTrafficPolicy: Local`; a client namespace on the switch as the management cluster.
// Twice, each on a fresh cluster: without drainguard (baseline), then with it injected:
//   1. `kubectl drain` of the control-plane node that owns the API VIP, through the VIP;
//   2. at once `etcdctl member remove` of its etcd member (its processes keep running, its API
//      server answers from a stale cache, lab/cluster/stale-api.ts);
//   3. GONE_AFTER_S later the node goes away (its link goes down);
//   4. measured until WATCH_S after that.
// Measured from the client: ARP answers for the VIP every 50 ms, and a GET of the drained Node
// through the VIP every 100 ms (api-probe.ts). Figures (figures.ts): dark_s, dual_s,
// api_unavailable_s, silenced_s, drain_seen_s. Last line JSON: {"bench":"seed", ..., "baseline"}.
//   GONE_AFTER_S (default 20), WATCH_S (default 15)
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
import { API_VIP_SERVICE, installApiVip, vipKubeconfig } from '../../../lab/cluster/api-vip.ts';
import { type Cluster, startCluster } from '../../../lab/cluster/cluster.ts';
import { memberList, memberRemove } from '../../../lab/cluster/etcd-cluster.ts';
import { API_PORT, type ControlPlaneMember } from '../../../lab/cluster/ha-control-plane.ts';
import { installDrainguard, installMetalLbBase } from '../../../lab/cluster/install.ts';
import { installSpeakers } from '../../../lab/cluster/metallb.ts';
import { waitFor } from '../../../shared/clock.ts';
import { type ApiRead, type SeedFigures, seedFigures } from './figures.ts';

const ARP_INTERVAL_MS = 50;
const API_INTERVAL_MS = 100;
const GONE_AFTER_S = Number(process.env.GONE_AFTER_S || 20);
const WATCH_S = Number(process.env.WATCH_S || 15);
const PROBE = new URL('./api-probe.ts', import.meta.url).pathname;
const T = { timeoutMs: 180_000, intervalMs: 250 };
const note = (line: string) => process.stderr.write(`[seed] ${line}\n`);

interface Pass extends SeedFigures {
  drained: string;
  new_owner: string | null;
  drain_s: number;
  drain_code: number;
  removed_at_s: number;
  gone_at_s: number;
}

async function pass(inject: boolean): Promise<Pass> {
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
      await c.k([
        'rollout',
        'status',
        '-n',
        'drainguard-system',
        'deployment/drainguard-webhook',
        '--timeout=180s',
      ]);
    }
    await installSpeakers(c, { inject });
    await installApiVip(c);
    const client = c.bed.node('client');
    const byMac = new Map(ha.members.map((m) => [m.node.mac.toLowerCase(), m]));
    let owner: ControlPlaneMember | undefined;
    await waitFor(
      `one control-plane node answers ARP for ${ha.apiVip}`,
      async () => {
        const macs = macsIn(await probeRounds(client, ha.apiVip, 6, ARP_INTERVAL_MS));
        owner = macs.length === 1 ? byMac.get(macs[0] as string) : undefined;
        return owner !== undefined;
      },
      T,
    );
    const drained = owner as ControlPlaneMember;
    const healthy = ha.members.find((m) => m !== drained) as ControlPlaneMember;
    note(`${inject ? 'drainguard' : 'baseline'}: ${drained.name} owns ${ha.apiVip}`);
    // A few seconds of quiet, so the sidecars (when injected) are past their start.
    await new Promise((r) => setTimeout(r, 3_000));

    const rounds: ProbeRound[] = [];
    procs.push(startArpProbe(client, ha.apiVip, ARP_INTERVAL_MS, (r) => rounds.push(r)));
    const reads: ApiRead[] = [];
    const probe = client.spawn(
      [
        process.execPath,
        PROBE,
        JSON.stringify({
          server: `https://${ha.apiVip}:${API_PORT}`,
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
        reads.push(JSON.parse(l) as ApiRead);
      } catch {}
    });
    await waitFor('the probes run', () => rounds.length > 5 && reads.length > 5, T);

    // 1. The drain, through the VIP, as Cluster API does it.
    const from = Date.now();
    const kubeconfig = vipKubeconfig(c);
    const drain = await client.exec(
      [
        'kubectl',
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
    const drainS = (Date.now() - from) / 1000;
    note(`drain: ${drain.code} in ${drainS.toFixed(1)} s ${drain.stderr.trim().split('\n').pop() ?? ''}`);
    // 2. At once, its etcd member removed (through a healthy member).
    const id = (await memberList(healthy.etcdClientURL)).find((m) => m.name === drained.name)?.id as string;
    await memberRemove(healthy.etcdClientURL, id);
    const removedAt = Date.now();
    // 3. After a while the node goes away.
    await new Promise((r) => setTimeout(r, GONE_AFTER_S * 1000));
    await drained.node.run(['ip', 'link', 'set', 'eth0', 'down']);
    const goneAt = Date.now();
    await new Promise((r) => setTimeout(r, WATCH_S * 1000));
    const to = Date.now();
    for (const p of procs) await stopProcess(p, 'SIGKILL');
    // The drained node's container logs (speaker, sidecar), read from its disk: its link is down.
    const logs = join(tmpdir(), `drainguard-seed-${inject ? 'drainguard' : 'baseline'}-logs`);
    rmSync(logs, { recursive: true, force: true });
    cpSync(join(c.dir, drained.name, 'pod-logs'), logs, { recursive: true });
    note(
      `${inject ? 'drainguard' : 'baseline'}: ${drained.name}'s pod logs in ${logs} (drain at ${new Date(from).toISOString()})`,
    );
    const figures = seedFigures({
      rounds,
      reads,
      intervalMs: ARP_INTERVAL_MS,
      from,
      to,
      drainedMac: drained.node.mac.toLowerCase(),
      removedAt,
    });
    const last = figures.owners[figures.owners.length - 1]?.[1] ?? [];
    const newOwner = last.length === 1 ? (byMac.get(last[0] as string)?.name ?? last[0]) : null;
    return {
      drained: drained.name,
      new_owner: newOwner ?? null,
      drain_s: Math.round(drainS * 1000) / 1000,
      drain_code: drain.code,
      removed_at_s: Math.round(removedAt - from) / 1000,
      gone_at_s: Math.round(goneAt - from) / 1000,
      ...figures,
      owners: figures.owners.map(([s, macs]) => [s, macs.map((m) => byMac.get(m)?.name ?? m)]),
    };
  } finally {
    for (const p of procs) await stopProcess(p, 'SIGKILL').catch(() => {});
    await c.stop();
  }
}

const baseline = await pass(false);
note(`baseline: ${JSON.stringify(baseline)}`);
const withDg = await pass(true);
note(`drainguard: ${JSON.stringify(withDg)}`);
const four = (p: Pass) => ({
  dark_s: p.dark_s,
  dual_s: p.dual_s,
  api_unavailable_s: p.api_unavailable_s,
  silenced_s: p.silenced_s,
});
process.stdout.write(
  `${JSON.stringify({
    bench: 'seed',
    service: `${API_VIP_SERVICE.namespace}/${API_VIP_SERVICE.name}`,
    gone_after_s: GONE_AFTER_S,
    ...four(withDg),
    drain_seen_s: withDg.drain_seen_s,
    api_back_s: withDg.api_back_s,
    drained: withDg.drained,
    new_owner: withDg.new_owner,
    owners: withDg.owners,
    baseline: {
      ...four(baseline),
      drain_seen_s: baseline.drain_seen_s,
      api_back_s: baseline.api_back_s,
      owners: baseline.owners,
    },
  })}\n`,
);
