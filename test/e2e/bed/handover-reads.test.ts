// What one L2 handover reads, against a real API server: the sidecar (its source, observe-only,
// host tools stubbed) talks to kube-apiserver through the counting proxy (./api-proxy.ts), and
// its Node is cordoned while nobody takes the VIP over (a handover that runs its whole 12 s
// budget, then gives up) and while no other node could take it (refused). Every Node and every
// speaker pod must be listed at most twice per handover — not re-read every 2 s — and nothing
// wide is read any more once the handover is given up or refused. A refused handover starts as
// soon as another node becomes eligible, seen through its watch, without another list.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import t from 'tap';
import { sharedControlPlane } from '../../../lab/bed/control-plane.ts';
import { START_DEADLINE_MS } from '../../../lab/bed/proc.ts';
import { stubTools } from '../../../lab/fake/stub-tools.ts';
import { putL2Config, waitForMetalLbResources } from '../../../lab/sim/speaker/objects.ts';
import { waitFor } from '../../../shared/clock.ts';
import type { KubeObject, Node } from '../../../shared/kube/types.ts';
import { type L2State, parseL2State } from '../../../shared/l2-state.ts';
import { L2_STATE_ANNOTATION } from '../../../shared/names.ts';
import { announce } from '../../bench/api/drain.ts';
import { injectedPod, NAMESPACES, realisticNode, runningStatus } from '../../bench/api/objects.ts';
import { apiProxy, type ProxiedCall } from './api-proxy.ts';

const ROOT = new URL('../../..', import.meta.url).pathname;
const NS = NAMESPACES['metallb-speaker'];
const NODES = ['reads-a', 'reads-b', 'reads-c', 'reads-d'];
const SELF = 'reads-a';
const DAEMONSET_UID = '5f0c6c1e-0000-4000-8000-000000000001';
const BUDGET_S = 12;

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });

/** A LIST of the whole collection (its first page: later pages carry `continue`), no selector. */
const wholeList = (path: string) => (c: ProxiedCall) =>
  c.verb === 'LIST' &&
  new URL(c.url, 'https://x').pathname === path &&
  !c.query.get('fieldSelector') &&
  !c.query.get('labelSelector') &&
  !c.query.get('continue');
const NODES_PATH = '/api/v1/nodes';
const PODS_PATH = `/api/v1/namespaces/${NS}/pods`;

t.test(
  'one handover lists every Node and speaker pod at most twice, and stops reading once given up or refused',
  async (t) => {
    const cp = await sharedControlPlane();
    const admin = cp.client();
    t.teardown(() => admin.close());
    const proxy = await apiProxy(cp);
    t.teardown(proxy.close);
    const dir = mkdtempSync(join(tmpdir(), 'drainguard-reads-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));

    // MetalLB's CRDs and config, a speaker pod of one DaemonSet on each Node, one VIP announced here.
    await admin.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    for (const file of ['ipaddresspool', 'l2advertisement', 'servicel2status']) {
      const r = await cp.kubectl([
        'apply',
        '--validate=false',
        '-f',
        join(ROOT, `lab/sim/speaker/crds/${file}.yaml`),
      ]);
      if (r.code !== 0) throw new Error(r.stderr);
    }
    await waitForMetalLbResources(admin, ['ipaddresspools', 'l2advertisements', 'servicel2statuses']);
    await putL2Config(admin, NS, ['192.0.2.100-192.0.2.120']);
    let uid = '';
    for (const [i, name] of NODES.entries()) {
      await admin.create(NODES_PATH, realisticNode(name, 70_000 + i));
      const inj = injectedPod('metallb-speaker', `speaker-${name}`, name);
      const meta = inj.pod.metadata as KubeObject['metadata'];
      const pod = await admin.create<KubeObject & Record<string, unknown>>(PODS_PATH, {
        ...inj.pod,
        metadata: {
          ...meta,
          ownerReferences: [
            {
              apiVersion: 'apps/v1',
              kind: 'DaemonSet',
              name: 'speaker',
              uid: DAEMONSET_UID,
              controller: true,
            },
          ],
        },
      });
      await admin.patch(
        `${PODS_PATH}/speaker-${name}/status`,
        { status: runningStatus(pod, `10.220.0.${i + 1}`) },
        'merge',
      );
      if (name === SELF) uid = pod.metadata?.uid ?? '';
    }
    await announce(admin, SELF);

    // The sidecar as injected (the planner's env), through the proxy, observe-only.
    const kubeconfig = join(dir, 'kubeconfig.json');
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'proxy',
        clusters: [
          {
            name: 'proxy',
            cluster: {
              server: proxy.server,
              'certificate-authority-data': Buffer.from(cp.target.ca ?? '').toString('base64'),
            },
          },
        ],
        users: [{ name: 'admin', user: { token: cp.target.token ?? '' } }],
        contexts: [{ name: 'proxy', context: { cluster: 'proxy', user: 'admin' } }],
      }),
    );
    const env = injectedPod('metallb-speaker', `speaker-${SELF}`, SELF).env({ uid, podIPs: ['10.220.0.1'] });
    const port = await freePort();
    const output: string[] = [];
    const sidecar: ChildProcess = spawn(process.execPath, [join(ROOT, 'cli/drainguard.ts'), 'sidecar'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...env,
        PATH: `${stubTools(dir)}:${process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'}`,
        KUBECONFIG: kubeconfig,
        DRAINGUARD_PORT: String(port),
        DRAINGUARD_BIND_ADDRESS: '127.0.0.1',
        DRAINGUARD_OBSERVE_ONLY: 'true',
        DRAINGUARD_HANDOVER_BUDGET_SECONDS: String(BUDGET_S),
      },
    });
    for (const s of [sidecar.stdout!, sidecar.stderr!])
      createInterface({ input: s }).on('line', (l) => {
        output.push(l);
        if (process.env.L2_DEBUG) process.stderr.write(`[${SELF}] ${l}\n`);
      });
    t.teardown(
      () =>
        new Promise<void>((r) => {
          if (sidecar.exitCode !== null) return r();
          sidecar.once('exit', () => r());
          sidecar.kill('SIGKILL');
        }),
    );
    await waitFor(
      'the sidecar is ready',
      async () => {
        if (sidecar.exitCode !== null) throw new Error(`sidecar exited: ${output.slice(-5).join('\n')}`);
        return (await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(1_000) })).ok;
      },
      // Starting is not what this measures (under three lanes' load a start took over 30 s).
      { timeoutMs: START_DEADLINE_MS, intervalMs: 100 },
    );
    await waitFor(
      'the sidecar watches the ServiceL2Statuses',
      () =>
        proxy.calls.some(
          (c) => c.verb === 'WATCH' && c.url.includes('/servicel2statuses') && c.status === 200,
        ),
      { timeoutMs: START_DEADLINE_MS },
    );

    const state = async (): Promise<L2State | undefined> => {
      const n = await admin.get<Node>(`${NODES_PATH}/${SELF}`);
      return parseL2State(n.metadata?.annotations?.[L2_STATE_ANNOTATION]);
    };
    const cordon = (name: string, on: boolean) =>
      admin.patch(`${NODES_PATH}/${name}`, { spec: { unschedulable: on } }, 'merge');
    const since = (at: number, path: string) => proxy.calls.filter((c) => c.t >= at && wholeList(path)(c));
    const wideWatchesOpen = () =>
      proxy.calls.filter(
        (c) =>
          c.verb === 'WATCH' &&
          c.ended === 0 &&
          [NODES_PATH, PODS_PATH].includes(new URL(c.url, 'https://x').pathname) &&
          !c.query.get('fieldSelector'),
      ).length;
    /** Watches the wire for `ms` (reads that must NOT happen: there is no event to wait for). */
    const quietFor = async (ms: number) => {
      const until = Date.now() + ms;
      await waitFor(`${ms} ms`, () => Date.now() >= until, { timeoutMs: ms + 5_000, intervalMs: 200 });
    };

    await t.test('a handover nobody confirms runs its whole budget, then gives up', async (t) => {
      const t0 = Date.now();
      await cordon(SELF, true);
      await waitFor(
        'the handover is under way',
        async () => (await state())?.phase === 'awaiting-confirmation',
        {
          timeoutMs: 20_000,
        },
      );
      await waitFor('the handover is given up', async () => (await state())?.gaveUp === true, {
        timeoutMs: (BUDGET_S + 20) * 1_000,
        intervalMs: 200,
      });
      const gaveUpAt = Date.now();
      t.ok(gaveUpAt - t0 > 10_000, `the handover ran ${((gaveUpAt - t0) / 1000).toFixed(1)} s`);
      await waitFor('the wide watches are closed', () => wideWatchesOpen() === 0, { timeoutMs: 5_000 });
      await quietFor(6_000);
      const nodes = since(t0, NODES_PATH);
      const pods = since(t0, PODS_PATH);
      t.comment(`whole lists during the handover: ${nodes.length} of the Nodes, ${pods.length} of the pods`);
      t.ok(nodes.length >= 1 && nodes.length <= 2, `Nodes listed ${nodes.length} times (at most twice)`);
      t.ok(pods.length >= 1 && pods.length <= 2, `speaker pods listed ${pods.length} times (at most twice)`);
      t.equal(since(gaveUpAt + 1_000, NODES_PATH).length, 0, 'no Node list once given up');
      t.equal(since(gaveUpAt + 1_000, PODS_PATH).length, 0, 'no pod list once given up');
      await cordon(SELF, false);
      await waitFor(
        'idle again',
        async () => {
          const s = await state();
          return s?.phase === 'idle' && !s.gaveUp;
        },
        { timeoutMs: 20_000 },
      );
    });

    await t.test(
      'a refused handover reads nothing wide while it waits, and starts from its watch',
      async (t) => {
        for (const n of NODES.filter((n) => n !== SELF)) await cordon(n, true);
        const t1 = Date.now();
        await cordon(SELF, true);
        await waitFor('refused: no other node', async () => (await state())?.stranded === true, {
          timeoutMs: 20_000,
        });
        const refusedAt = Date.now();
        await quietFor(10_000);
        t.equal(since(refusedAt + 1_000, NODES_PATH).length, 0, 'no Node list while refused');
        t.equal(since(refusedAt + 1_000, PODS_PATH).length, 0, 'no pod list while refused');
        t.ok(wideWatchesOpen() >= 1, 'the Nodes are watched while refused');
        await cordon('reads-b', false);
        await waitFor(
          'the handover starts once reads-b is eligible',
          async () => {
            const s = await state();
            return s?.phase === 'labelled' || s?.phase === 'awaiting-confirmation';
          },
          { timeoutMs: 15_000 },
        );
        const nodes = since(t1, NODES_PATH);
        t.equal(nodes.length, 1, `Nodes listed ${nodes.length} times: once, when the handover started`);
        t.equal(since(t1, PODS_PATH).length, 1, 'speaker pods listed once');
        await cordon(SELF, false);
        for (const n of NODES.filter((n) => n !== SELF)) await cordon(n, false);
      },
    );
  },
);
