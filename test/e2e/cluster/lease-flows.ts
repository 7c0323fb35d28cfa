// Lease handover on real kubelets: a skupper-router-like Deployment (2 replicas on different
// nodes, service account skupper-router, Lease skupper-site-leader) whose kube-adaptor container
// is the client-go candidate simulator from the lab image; drainguard installed from manifests/.
// `kubectl drain` of the leader's node: the real kubelet stops the leader container, its status
// reaches the API, the sidecar hands the Lease to the Ready replica, and the ReplicaSet's
// replacement pod joins as a candidate.
import t from 'tap';
import type { Cluster } from '../../../lab/cluster/cluster.ts';
import { followEvents as followPodEvents } from '../../../lab/cluster/logs.ts';
import { injectedAndReady, podsOf, runningStatuses, sidecarMode } from '../../../lab/cluster/pods.ts';
import { installSkupperSite, SKUPPER_LEASE } from '../../../lab/cluster/skupper.ts';
import { waitFor } from '../../../shared/clock.ts';
import { withLogs } from './logs.ts';
import { cluster, installed } from './shared.ts';

const NS = 'site';
const LEASE = SKUPPER_LEASE;
const T = { timeoutMs: 120_000, intervalMs: 250 };

interface Ev {
  ev: string;
  identity: string;
  t: number;
}

let c: Cluster;
/** The node the drain test cordoned, uncordoned when the suite ends. */
let drained: string | undefined;
const k = (args: string[], input?: string) => c.k(args, input === undefined ? {} : { input });
const routers = () => podsOf(c, NS, 'skupper.io/component=router');
const holder = async () =>
  (
    JSON.parse(await k(['get', 'lease', '-n', NS, LEASE, '-o', 'json'])) as {
      spec?: { holderIdentity?: string };
    }
  ).spec?.holderIdentity;

/** The candidate's JSON lines (and the raw ones), followed until the container exits. */
const followEvents = (pod: string, container = 'kube-adaptor') => followPodEvents<Ev>(c, NS, pod, container);

/** A failing test carries the routers' sidecar logs and every component's. */
const logged = (fn: () => Promise<void>) => withLogs(c, fn, { namespace: NS, pods: routers });

async function setUp(): Promise<void> {
  c = await cluster();
  await installed(c);
  await installSkupperSite(c, NS, { inject: true });
}

t.test('Lease handover on real kubelets', { timeout: 900_000 }, async (t) => {
  t.before(setUp);
  // The next suite schedules onto every node: leave none cordoned.
  t.teardown(async () => {
    if (drained) await c?.kubectl(['uncordon', drained]);
  });

  t.test('both router pods carry a Ready sidecar; one of them holds the Lease', async (t) =>
    logged(async () => {
      await waitFor(
        'two injected router pods on two nodes, all containers Ready',
        async () => {
          const pods = await routers();
          return (
            pods.length === 2 &&
            new Set(pods.map((p) => p.spec.nodeName)).size === 2 &&
            pods.every((p) => injectedAndReady(p, 3))
          );
        },
        T,
      );
      const h = await waitFor('a holder', holder, T);
      t.ok((await routers()).some((p) => p.metadata.name === h));
      // The Lease flow runs with a native sidecar too: it outlives the leader container, which the
      // kubelet stops first.
      for (const p of await routers())
        t.equal(sidecarMode(p), 'native', `${p.metadata.name}: native sidecar`);
    }),
  );

  t.test(
    'kubectl drain of the leader node: the Lease goes to the Ready replica, the replacement joins as a candidate',
    async (t) =>
      logged(async () => {
        const pods = await routers();
        const leaderName = await holder();
        const leader = pods.find((p) => p.metadata.name === leaderName);
        const successor = pods.find((p) => p.metadata.name !== leaderName);
        if (!leader || !successor)
          throw new Error(`no leader and successor among ${pods.length} router pods`);
        const oldLog = followEvents(leader.metadata.name);
        const newLog = followEvents(successor.metadata.name);
        const sidecarLog = followEvents(leader.metadata.name, 'drainguard');
        try {
          await waitFor('log streams open', () => oldLog.events.length > 0 && newLog.events.length > 0, T);
          const node = leader.spec.nodeName as string;
          drained = node;
          await k(['drain', node, '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=180s']);
          const stopped = await waitFor(
            'the old leader stopped',
            () => oldLog.events.find((e) => e.ev === 'stopped-leading'),
            T,
          );
          const started = await waitFor(
            'the successor leads',
            () => newLog.events.find((e) => e.ev === 'leading'),
            T,
          );
          t.equal(await holder(), successor.metadata.name, 'the Lease names the Ready replica');
          const finished = await waitFor(
            "the leader's sidecar finished its handover",
            () => sidecarLog.lines.find((l) => l.includes('Lease handover finished')),
            T,
          );
          t.match(
            finished,
            /"outcome":"handed-over"/,
            `drainguard handed the Lease over:\n${sidecarLog.lines.join('\n')}`,
          );
          t.ok(
            started.t >= stopped.t,
            `no split brain: new leader started ${started.t - stopped.t} ms after the old stopped`,
          );
          process.stdout.write(
            `# drain: leaderless window ${started.t - stopped.t} ms (Lease duration 15 s)\n`,
          );
          const replacement = await waitFor(
            'a replacement router pod Ready on another node',
            async () =>
              (await routers()).find(
                (p) =>
                  p.metadata.uid !== leader.metadata.uid &&
                  p.metadata.uid !== successor.metadata.uid &&
                  runningStatuses(p).every((s) => s.ready),
              ),
            T,
          );
          t.not(replacement.spec.nodeName, node);
          const joined = followEvents(replacement.metadata.name);
          try {
            await waitFor(
              'the replacement runs as a candidate',
              () => joined.events.some((e) => e.ev === 'candidate'),
              T,
            );
            t.equal(await holder(), successor.metadata.name, 'the replacement did not take the Lease');
          } finally {
            joined.proc.kill();
          }
        } finally {
          oldLog.proc.kill();
          newLog.proc.kill();
          sidecarLog.proc.kill();
        }
      }),
  );
});
