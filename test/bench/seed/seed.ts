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
// through the VIP every 100 ms (api-probe.ts), and the same of a control-plane node that stays,
// directly. Figures (figures.ts): dark_s, dual_s, api_unavailable_s (through the VIP),
// cluster_api_unavailable_s (directly: what the API itself allowed), silenced_s, drain_seen_s. Last line JSON: {"bench":"seed", ..., "baseline"}.
// A third pass with drainguard removes the member as soon as the cordon is in (removed_at_cordon):
// the handover then races the removal.
// With ETCD_LEADER=drained every pass first moves etcd's leadership to the drained node's member,
// so its removal also costs an election; each pass reports removed_leader either way.
//   GONE_AFTER_S (default 20), WATCH_S (default 15), ETCD_LEADER (any | drained; default any)
import { API_VIP_SERVICE } from '../../../lab/cluster/api-vip.ts';
import { type Pass, runSeed } from './sequence.ts';

const GONE_AFTER_S = Number(process.env.GONE_AFTER_S || 20);
const WATCH_S = Number(process.env.WATCH_S || 15);
const ETCD_LEADER = process.env.ETCD_LEADER || 'any';
if (ETCD_LEADER !== 'any' && ETCD_LEADER !== 'drained')
  throw new Error(`ETCD_LEADER: "${ETCD_LEADER}" is not accepted; use any or drained`);
const note = (line: string) => process.stderr.write(`[seed] ${line}\n`);

const pass = { goneAfterS: GONE_AFTER_S, watchS: WATCH_S, etcdLeader: ETCD_LEADER, note } as const;
const baseline = await runSeed({ ...pass, inject: false });
note(`baseline: ${JSON.stringify(baseline)}`);
const withDg = await runSeed({ ...pass, inject: true });
note(`drainguard: ${JSON.stringify(withDg)}`);
const race = await runSeed({ ...pass, inject: true, removeAt: 'cordoned' });
note(`drainguard, member removed at the cordon: ${JSON.stringify(race)}`);
const four = (p: Pass) => ({
  dark_s: p.dark_s,
  dual_s: p.dual_s,
  api_unavailable_s: p.api_unavailable_s,
  silenced_s: p.silenced_s,
  // Beside api_unavailable_s: what a node that stays answered directly (an etcd election's share).
  cluster_api_unavailable_s: p.cluster_api_unavailable_s,
  removed_leader: p.removed_leader,
});
process.stdout.write(
  `${JSON.stringify({
    bench: 'seed',
    service: `${API_VIP_SERVICE.namespace}/${API_VIP_SERVICE.name}`,
    gone_after_s: GONE_AFTER_S,
    etcd_leader: ETCD_LEADER,
    ...four(withDg),
    drain_seen_s: withDg.drain_seen_s,
    api_back_s: withDg.api_back_s,
    drained: withDg.drained,
    new_owner: withDg.new_owner,
    owners: withDg.owners,
    drain_s: withDg.drain_s,
    removed_at_s: withDg.removed_at_s,
    removed_at_cordon: {
      ...four(race),
      api_back_s: race.api_back_s,
      removed_at_s: race.removed_at_s,
      owners: race.owners,
    },
    baseline: {
      ...four(baseline),
      drain_seen_s: baseline.drain_seen_s,
      api_back_s: baseline.api_back_s,
      owners: baseline.owners,
    },
  })}\n`,
);
