// The trial's recorders (I/O): ARP probes of the VIP from the client namespace, reads of the
// Nodes, the speaker and router pods and the Lease every 250 ms, and the candidates' own logs.
// All from outside the product; times are epoch ms here, made relative to the action in trial.ts.
import type { ChildProcess } from 'node:child_process';
import { startArpProbe, stopProcess } from '../../lab/bed/arp-probe.ts';
import { followEvents } from '../../lab/cluster/logs.ts';
import {
  eligibleNodes,
  fencedNodes,
  leaseHolder,
  nodeViews,
  podsIn,
  routersOf,
  type Scene,
  SITE_NS,
  SPEAKER_NS,
} from '../../lab/cluster/robustness-scene.ts';
import type { ArpRound, EligibleSample, FenceReport, HolderSample, LeaderEvent } from './observations.ts';

const POLL_MS = 250;

export interface Recording {
  arp: ArpRound[];
  eligible: EligibleSample[];
  fences: FenceReport[];
  holders: HolderSample[];
  leaderEvents: LeaderEvent[];
  stop(): Promise<void>;
}

export function record(s: Scene): Recording {
  const rec: Recording = {
    arp: [],
    eligible: [],
    fences: [],
    holders: [],
    leaderEvents: [],
    stop: async () => {},
  };
  const probe = startArpProbe(s.c.bed.node('client'), s.vip, 50, (r) =>
    rec.arp.push({ t: r.t, nodes: r.macs.map(s.nodeOfMac) }),
  );
  // One log follower per router pod; followed again when its stream ends while the pod lives on
  // (an API server restart ends `kubectl logs -f` too). Its last end is kept as a possible exit.
  interface Followed {
    proc: ChildProcess;
    ended?: number;
    seen: Map<string, LeaderEvent>;
  }
  const followed = new Map<string, Followed>();
  const follow = (pod: string) => {
    const prev = followed.get(pod);
    if (prev && (prev.ended === undefined || Date.now() - prev.ended < 2_000)) return;
    const f = followEvents<{ ev: string; t: number }>(s.c, SITE_NS, pod, 'kube-adaptor');
    const entry: Followed = { proc: f.proc, seen: prev?.seen ?? new Map() };
    const take = () => {
      for (const e of f.events)
        if (e.ev === 'leading' || e.ev === 'stopped-leading')
          entry.seen.set(`${e.ev}@${e.t}`, { t: e.t, identity: pod, ev: e.ev });
    };
    f.proc.stdout?.on('data', () => setImmediate(take));
    f.proc.once('exit', () => {
      take();
      entry.ended = Date.now();
    });
    followed.set(pod, entry);
  };
  let fenced = new Set<string>();
  let lastEligible = '';
  let lastHolder: string | undefined;
  const gone = new Map<string, number>();
  let running = true;
  const poll = async () => {
    while (running) {
      const started = Date.now();
      await Promise.allSettled([
        nodeViews(s).then((nodes) => {
          const now = new Set(fencedNodes(nodes));
          for (const n of now) if (!fenced.has(n)) rec.fences.push({ node: n, t: started });
          for (const n of fenced)
            if (!now.has(n)) {
              const open = rec.fences.findLast((f) => f.node === n && f.liftedT === undefined);
              if (open) open.liftedT = started;
            }
          fenced = now;
        }),
        podsIn(s, SPEAKER_NS).then((speakers) => {
          const e = eligibleNodes(speakers);
          if (e.join() !== lastEligible || rec.eligible.length === 0)
            rec.eligible.push({ t: started, nodes: e });
          lastEligible = e.join();
        }),
        podsIn(s, SITE_NS).then((pods) => {
          const routers = routersOf(pods);
          for (const p of routers) if (!p.metadata.deletionTimestamp) follow(p.metadata.name);
          for (const name of followed.keys())
            if (!routers.some((p) => p.metadata.name === name) && !gone.has(name)) gone.set(name, started);
        }),
        leaseHolder(s).then((h) => {
          if (h !== lastHolder) rec.holders.push({ t: started, holder: h });
          lastHolder = h;
        }),
      ]);
      await new Promise((r) => setTimeout(r, Math.max(0, POLL_MS - (Date.now() - started))));
    }
  };
  const polling = poll();
  rec.stop = async () => {
    running = false;
    await polling;
    await stopProcess(probe, 'SIGKILL');
    for (const [pod, f] of followed) {
      const ended = f.ended;
      f.proc.kill();
      rec.leaderEvents.push(...f.seen.values());
      // A candidate whose log ended and whose pod is gone stopped leading then at the latest.
      const exit = gone.get(pod);
      if (exit !== undefined)
        rec.leaderEvents.push({ t: Math.min(exit, ended ?? exit), identity: pod, ev: 'exited' });
    }
  };
  return rec;
}
