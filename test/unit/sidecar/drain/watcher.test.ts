// DrainWatcher against a scripted API (lists, then watch events the test pushes): the
// terminating state a preStop hook sets, and what ends it.
import pino from 'pino';
import t, { type Test } from 'tap';
import { systemClock, waitFor } from '../../../../shared/clock.ts';
import type { KubeClient } from '../../../../shared/kube/client.ts';
import type { Node, Pod } from '../../../../shared/kube/types.ts';
import { GUARDED_REJOIN_MS } from '../../../../sidecar/drain/guarded.ts';
import { DrainWatcher, PROBE_WHILE_DOWN_MS } from '../../../../sidecar/drain/watcher.ts';
import type { DrainWatcherOptions } from '../../../../sidecar/drain/watcher-options.ts';

type Push = (ev: { type: string; object: object }) => void;

/** Lists from `objects`, single-object GETs from `get`; watches stay open and take pushed events. */
function scriptedApi(node: Node, pod: Pod, get: () => Promise<unknown>) {
  const pushers = new Map<string, Push>();
  const client = {
    get: async (path: string) => {
      if (path === '/api/v1/nodes') return { metadata: { resourceVersion: '1' }, items: [node] };
      if (path.endsWith('/pods')) return { metadata: { resourceVersion: '1' }, items: [pod] };
      return get();
    },
    watch: (path: string, _q: unknown, onEvent: Push, signal: AbortSignal) =>
      new Promise<void>((resolve) => {
        pushers.set(path, onEvent);
        signal.addEventListener('abort', () => resolve(), { once: true });
      }),
  } as unknown as KubeClient;
  return {
    client,
    push: (kind: 'node' | 'pod', object: object) =>
      pushers.get(kind === 'node' ? '/api/v1/nodes' : '/api/v1/namespaces/ns/pods')?.({
        type: 'MODIFIED',
        object,
      }),
  };
}

/** A clock whose sleeps end only when the test advances it (or their signal aborts). */
function manualClock() {
  let now = 0;
  let timers: { at: number; fire: () => void }[] = [];
  const clock = {
    now: () => now,
    sleep: (ms: number, signal?: AbortSignal) =>
      new Promise<void>((fire) => {
        timers.push({ at: now + ms, fire });
        signal?.addEventListener('abort', () => fire(), { once: true });
      }),
  };
  const advance = async (ms: number) => {
    now += ms;
    const due = timers.filter((x) => x.at <= now);
    timers = timers.filter((x) => x.at > now);
    for (const x of due) x.fire();
    await new Promise((r) => setImmediate(r));
  };
  return { clock, advance };
}

const node: Node = { metadata: { name: 'n1', resourceVersion: '1' }, spec: {} };
const pod = (restartCount: number, running: boolean, deletionTimestamp?: string): Pod => ({
  metadata: {
    name: 'p',
    namespace: 'ns',
    resourceVersion: String(2 + restartCount),
    ...(deletionTimestamp ? { deletionTimestamp } : {}),
  },
  status: {
    containerStatuses: [
      { name: 'speaker', restartCount, state: running ? { running: {} } : { terminated: { exitCode: 137 } } },
    ],
  },
});

/** The own pod with the guarded container `containerd://<id>` running and (by default) ready. */
function servingPod(restartCount: number, id: string, ready = true): Pod {
  const p = pod(restartCount, true);
  const s = p.status?.containerStatuses?.[0] as NonNullable<
    NonNullable<Pod['status']>['containerStatuses']
  >[0];
  s.containerID = `containerd://${id}`;
  s.ready = ready;
  return p;
}

function watcher(
  client: KubeClient,
  podUid?: string,
  extra: Partial<Pick<DrainWatcherOptions, 'clock' | 'proc' | 'log'>> = {},
) {
  return new DrainWatcher({
    ...(podUid ? { podUid } : {}),
    client,
    nodeName: 'n1',
    podName: 'p',
    podNamespace: 'ns',
    drainTaints: [],
    log: pino({ level: 'silent' }),
    clock: systemClock,
    guardedContainer: 'speaker',
    ...extra,
  });
}

/** A synced watcher that hands over for the guarded container's stops (handOverRestarts). */
async function restartWatcher(
  t: Test,
  client: KubeClient,
  extra: Partial<Pick<DrainWatcherOptions, 'clock' | 'proc' | 'log'>>,
): Promise<DrainWatcher> {
  const w = watcher(client, undefined, extra);
  w.handOverRestarts(true);
  w.start();
  t.teardown(() => w.stop());
  await waitFor('synced', () => w.current.synced, { timeoutMs: 5_000 });
  return w;
}

/** A watcher started on `client` and synced; stopped when the test ends. */
async function syncedWatcher(t: Test, client: KubeClient, podUid?: string): Promise<DrainWatcher> {
  const w = watcher(client, podUid);
  w.start();
  t.teardown(() => w.stop());
  await waitFor('synced', () => w.current.synced, { timeoutMs: 5_000 });
  return w;
}

t.test(
  'goingAway: a hook with the pod not deleted and the node not draining is a container restart',
  async (t) => {
    const api = scriptedApi(node, pod(0, true), async () => pod(0, true));
    const w = await syncedWatcher(t, api.client);
    t.strictSame(await w.goingAway(), {
      going: false,
      why: 'pod not deleted, node not draining (a container restart)',
    });
    // The fresh read sees a deletion our watch has not delivered yet; an unreadable Pod counts as going.
    const deleted = watcher(
      scriptedApi(node, pod(0, true), async () => pod(0, true, '2026-11-23T00:00:00Z')).client,
    );
    t.strictSame(await deleted.goingAway(), { going: true, why: 'pod deleted' });
    const down = watcher(
      scriptedApi(node, pod(0, true), async () => {
        throw new Error('connect ECONNREFUSED');
      }).client,
    );
    t.match((await down.goingAway()).why, /own Pod unknown \(connect ECONNREFUSED\)/);
  },
);

t.test(
  'terminating set by a hook ends when the guarded container runs again, not before, and never while the pod is deleted',
  async (t) => {
    const api = scriptedApi(node, pod(0, true), async () => pod(0, true));
    const w = await syncedWatcher(t, api.client);
    w.markTerminating();
    t.equal(w.current.terminating, true);
    api.push('pod', pod(0, false)); // killed after the hook
    t.equal(w.current.terminating, true);
    api.push('pod', pod(1, true)); // restarted and running
    t.equal(w.current.terminating, false);
    // A real deletion: the hook's mark stays even if the container were restarted.
    w.markTerminating();
    api.push('pod', pod(2, true, '2026-11-23T00:00:00Z'));
    t.equal(w.current.terminating, true);
  },
);

t.test(
  'a pod re-created under the own name (another UID) is not this pod: gone, terminating, never its view',
  async (t) => {
    const own = { ...pod(0, true), metadata: { ...pod(0, true).metadata, uid: 'uid-own' } };
    const other = (deletionTimestamp?: string): Pod => {
      const p = pod(0, true, deletionTimestamp);
      return { ...p, metadata: { ...p.metadata, uid: 'uid-new', resourceVersion: '9' } };
    };
    const api = scriptedApi(node, own, async () => other());
    const w = await syncedWatcher(t, api.client, 'uid-own');
    t.equal(w.pod?.metadata?.uid, 'uid-own');
    t.strictSame(
      { terminating: w.current.terminating, replaced: w.current.podReplaced },
      { terminating: false, replaced: false },
    );
    // Force-deleted and re-created by its StatefulSet: the watch shows a pod of the same name.
    api.push('pod', other());
    t.equal(w.pod, undefined, "the new pod's status is not this pod's");
    t.strictSame(
      { terminating: w.current.terminating, replaced: w.current.podReplaced },
      { terminating: true, replaced: true },
    );
    t.strictSame(await w.goingAway(), { going: true, why: 'pod re-created under the same name' });
    // Before the watch shows it, the fresh read in goingAway() does.
    const fresh = watcher(scriptedApi(node, own, async () => other()).client, 'uid-own');
    t.strictSame(await fresh.goingAway(), { going: true, why: 'pod re-created under the same name' });
  },
);

t.test(
  'while the API counts as down the own Node is read consistently until it answers; then the probing stops',
  async (t) => {
    // Answers from the watch cache no longer clear "API down" (a stale API server gives them), so
    // something must read consistently; before, nothing did and an idle sidecar stayed "down".
    let reads = 0;
    let answer = true;
    let w: DrainWatcher | undefined;
    const api = scriptedApi(node, pod(0, true), async () => {
      reads++;
      // As the real client does: a consistent answer reports the API up.
      if (!answer) throw new Error('timeout');
      w?.api.result(true);
      return node;
    });
    w = await syncedWatcher(t, api.client);
    answer = false;
    const before = reads;
    w.api.result(false);
    t.ok(w.api.downSince !== undefined, 'down');
    await waitFor('a probe', () => reads > before, { timeoutMs: 5_000 });
    t.ok(w.api.downSince !== undefined, 'a failed probe keeps it down');
    answer = true;
    await waitFor('up again', () => w?.api.downSince === undefined, { timeoutMs: 6_000 });
    const after = reads;
    // Nothing to wait on: the absence of a probe over more than one probe period is the assertion.
    await new Promise((r) => setTimeout(r, PROBE_WHILE_DOWN_MS + 500));
    t.equal(reads, after, 'no probe while the API is up');
  },
);

t.test(
  'the listed view is not synced until the own Node is read consistently; a newer Node from that read replaces it',
  async (t) => {
    // A stale API server lists at once from its watch cache (old data) and never answers a
    // consistent read: nothing it listed may be acted on. Before, the list alone made it synced.
    let answer: 'none' | 'newer' = 'none';
    const reopened: string[] = [];
    const cordoned: Node = { metadata: { name: 'n1', resourceVersion: '7' }, spec: { unschedulable: true } };
    const api = scriptedApi(node, pod(0, true), async () => {
      if (answer === 'none') throw new Error('timed out after 5000 ms');
      return cordoned;
    });
    (api.client as unknown as { reopenWatches: (why: string) => void }).reopenWatches = (why) =>
      reopened.push(why);
    const w = watcher(api.client);
    w.start();
    t.teardown(() => w.stop());
    await waitFor('listed', () => w.node !== undefined, { timeoutMs: 5_000 });
    t.equal(w.current.synced, false, 'listed but not confirmed: not synced');
    w.api.result(false); // what the real client reports for the failed read
    answer = 'newer';
    await waitFor('synced', () => w.current.synced, { timeoutMs: PROBE_WHILE_DOWN_MS + 3_000 });
    t.equal(
      w.current.draining,
      true,
      'the consistent read (cordoned, resourceVersion 7) replaced the list (1)',
    );
    t.equal(reopened.length, 1, 'the watches are re-opened: they may sit on the stale server');
  },
);

t.test(
  "a view that arrives while the API is down starts the fail-safe's grace then, not at the outage's start",
  async (t) => {
    // A restart during an outage: when the API server comes back, the informers' (cached) lists
    // show the drain a moment before a consistent read says the API is up. The grace must not
    // count from the restart, or the fail-safe fires in that moment.
    const api = scriptedApi(node, pod(0, true), async () => node);
    const w = await syncedWatcher(t, api.client);
    w.api.result(false);
    const downSince = w.api.downSince ?? 0;
    await waitFor('time to move on', () => Date.now() > downSince + 20, { timeoutMs: 1_000 });
    const cordonedAt = Date.now();
    api.push('node', { metadata: { name: 'n1', resourceVersion: '2' }, spec: { unschedulable: true } });
    t.equal(w.current.draining, true);
    t.ok((w.api.downSince ?? 0) >= cordonedAt, 'down since the drain became known');
    // Later failures do not move it again.
    const since = w.api.downSince;
    w.api.result(false);
    t.equal(w.api.downSince, since);
  },
);

t.test(
  'handOverRestarts: a guarded container stop is a drain (its reason named) until a new one serves; a hook of a restart too',
  async (t) => {
    // Time moves only when the test says (the new container's GUARDED_REJOIN_MS).
    const { clock, advance } = manualClock();
    const api = scriptedApi(node, servingPod(0, 'a'), async () => servingPod(0, 'a'));
    const w = await restartWatcher(t, api.client, { clock });
    t.equal(w.current.draining, false);
    api.push('pod', pod(0, false)); // SIGKILLed
    t.strictSame(
      { draining: w.current.draining, why: w.current.drainReason, terminating: w.current.terminating },
      { draining: true, why: 'container speaker stopped', terminating: false },
    );
    t.strictSame(
      await w.goingAway(),
      { going: false, why: 'pod not deleted, node not draining (a container restart)' },
      'the pod is not going away for it',
    );
    api.push('pod', servingPod(1, 'b', false));
    t.equal(w.current.draining, true, 'running, not ready yet');
    api.push('pod', servingPod(1, 'b'));
    t.equal(w.current.draining, true, 'the new container serves, not for GUARDED_REJOIN_MS yet');
    await advance(GUARDED_REJOIN_MS - 1);
    t.equal(w.current.draining, true);
    await advance(1);
    t.equal(w.current.draining, false, 'served long enough: the node is taken back without another event');
    // A liveness failure: the hook comes before the kill.
    t.equal(w.markGuardedStopping(), true);
    t.strictSame(
      { draining: w.current.draining, why: w.current.drainReason },
      { draining: true, why: 'container speaker restarting (preStop hook)' },
    );
    api.push('pod', servingPod(2, 'c'));
    await advance(GUARDED_REJOIN_MS);
    t.equal(w.current.draining, false);
    // Without handOverRestarts (a Lease profile), nothing of this.
    const plain = await syncedWatcher(
      t,
      scriptedApi(node, servingPod(0, 'a'), async () => servingPod(0, 'a')).client,
    );
    t.equal(plain.markGuardedStopping(), false);
    t.equal(plain.current.draining, false);
  },
);

t.test(
  'handOverRestarts with the guarded processes visible (a shared PID namespace): their going is a stop at once, before the kubelet reports it',
  async (t) => {
    const id = 'ab'.repeat(32);
    const procs = new Map<string, string>([
      ['1', '0::/kubepods/pod-x/pause'],
      ['7', `0::/kubepods/pod-x/${id}`],
    ]);
    const fs = {
      readdir: () => [...procs.keys(), 'self'],
      readFile: (p: string) => {
        const text = procs.get(p.split('/')[2] ?? '');
        if (text === undefined) throw new Error('ENOENT');
        return text;
      },
    };
    const { clock, advance } = manualClock();
    const running = servingPod(0, id);
    const api = scriptedApi(node, running, async () => running);
    const w = await restartWatcher(t, api.client, { clock, proc: { dir: '/proc', fs } });
    await advance(100);
    t.equal(w.current.draining, false, 'its process is there');
    procs.delete('7'); // SIGKILLed; the API still says running
    await advance(100);
    t.strictSame(
      { draining: w.current.draining, why: w.current.drainReason },
      { draining: true, why: 'container speaker exited' },
    );
  },
);

t.test(
  'a guarded stop is logged once, however often its record changes (a new container serving)',
  async (t) => {
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => lines.push(l) });
    const { clock, advance } = manualClock();
    const api = scriptedApi(node, servingPod(0, 'a'), async () => servingPod(0, 'a'));
    const w = await restartWatcher(t, api.client, { clock, log });
    w.markGuardedStopping();
    api.push('pod', pod(0, false));
    api.push('pod', servingPod(1, 'b')); // the new container serves: the stop's record gets a start time
    await advance(GUARDED_REJOIN_MS);
    const said = (m: string) => lines.filter((l) => l.includes(m)).length;
    t.equal(said('the guarded container stopped while the pod stays'), 1);
    t.equal(said('taking the node back'), 1);
  },
);

/** The consistent Node read that syncs a watcher answers; once `on`, every fresh read is a 429. */
const throttledAfterSync = {
  on: false,
  read: async () => {
    if (throttledAfterSync.on) throw new Error('429 Too Many Requests');
    return node;
  },
};

t.test(
  'issue 42 item 10: a hook taken for a deletion because the own Pod was unreadable (429) is disproved at once by the guarded container restarting in the shared PID namespace',
  async (t) => {
    const id = 'ab'.repeat(32);
    const sidecarId = 'cd'.repeat(32);
    const procs = new Map<string, string>([
      ['1', '0::/kubepods/pod-x/pause'],
      ['5', `0::/kubepods/pod-x/cri-containerd-${sidecarId}.scope`],
      ['7', `0::/kubepods/pod-x/${id}`],
    ]);
    const fs = {
      readdir: () => [...procs.keys(), 'self'],
      readFile: (p: string) => {
        const text = procs.get(p.split('/')[2] ?? '');
        if (text === undefined) throw new Error('ENOENT');
        return text;
      },
    };
    const { clock, advance } = manualClock();
    const running = servingPod(0, id);
    throttledAfterSync.on = false;
    const api = scriptedApi(node, running, throttledAfterSync.read);
    const w = await restartWatcher(t, api.client, { clock, proc: { dir: '/proc', fs } });
    // From now every fresh read is answered 429 (API priority and fairness throttling the sidecar's flow).
    throttledAfterSync.on = true;
    const hook = await w.goingAway();
    t.match(hook, { going: true, presumed: true, why: /own Pod unknown/ });
    w.markTerminating({ presumed: hook.presumed === true });
    t.equal(w.current.terminating, true, 'presumed going away meanwhile');
    await advance(100);
    t.equal(w.current.terminating, true, 'the hook returned, the container not killed yet');
    procs.delete('7'); // killed after the hook
    await advance(100);
    t.equal(w.current.terminating, true, 'killed: a deletion kills it too');
    procs.set('9', `0::/kubepods/pod-x/${'ef'.repeat(32)}`); // the kubelet started it again
    await advance(100);
    t.strictSame(
      { terminating: w.current.terminating, hookRestartSeen: w.current.hookRestartSeen },
      { terminating: false, hookRestartSeen: true },
      'a container started: the pod is not being deleted, though its Pod is still unreadable',
    );
    // The next hook starts over.
    w.markTerminating({ presumed: true });
    t.strictSame(
      { terminating: w.current.terminating, hookRestartSeen: w.current.hookRestartSeen },
      { terminating: true, hookRestartSeen: false },
    );
  },
);

t.test(
  'issue 42 item 10: nothing disproves a termination that is certain (SIGTERM) or a deletion the watch shows',
  async (t) => {
    const id = 'ab'.repeat(32);
    const procs = new Map<string, string>([['7', `0::/kubepods/pod-x/${id}`]]);
    const fs = {
      readdir: () => [...procs.keys()],
      readFile: (p: string) => {
        const text = procs.get(p.split('/')[2] ?? '');
        if (text === undefined) throw new Error('ENOENT');
        return text;
      },
    };
    const restart = async (w: DrainWatcher, advance: (ms: number) => Promise<void>) => {
      procs.delete('7');
      await advance(100);
      procs.set('9', `0::/kubepods/pod-x/${'ef'.repeat(32)}`);
      await advance(100);
      await advance(100);
      const { terminating, hookRestartSeen } = w.current;
      procs.delete('9');
      procs.set('7', `0::/kubepods/pod-x/${id}`);
      return { terminating, hookRestartSeen };
    };
    const down = throttledAfterSync.read;
    {
      // The presumed hook, then SIGTERM: certain.
      throttledAfterSync.on = false;
      const { clock, advance } = manualClock();
      const api = scriptedApi(node, servingPod(0, id), down);
      const w = await restartWatcher(t, api.client, { clock, proc: { dir: '/proc', fs } });
      throttledAfterSync.on = true;
      w.markTerminating({ presumed: true });
      w.markTerminating();
      t.strictSame(await restart(w, advance), { terminating: true, hookRestartSeen: false }, 'SIGTERM');
    }
    {
      // The presumed hook, then the deletion arrives on the watch.
      const { clock, advance } = manualClock();
      const api = scriptedApi(node, servingPod(0, id), down);
      throttledAfterSync.on = false;
      const w = await restartWatcher(t, api.client, { clock, proc: { dir: '/proc', fs } });
      throttledAfterSync.on = true;
      w.markTerminating({ presumed: true });
      const deleted = servingPod(0, id);
      deleted.metadata = { ...deleted.metadata, deletionTimestamp: '2026-11-23T00:00:00Z' };
      api.push('pod', deleted);
      t.strictSame(await restart(w, advance), { terminating: true, hookRestartSeen: false }, 'deleted');
    }
  },
);
