// DrainWatcher against a scripted API (lists, then watch events the test pushes): the
// terminating state a preStop hook sets, and what ends it.
import pino from 'pino';
import t, { type Test } from 'tap';
import { systemClock, waitFor } from '../../../shared/clock.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { Node, Pod } from '../../../shared/kube/types.ts';
import { DrainWatcher } from '../../../sidecar/drain/watcher.ts';

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

function watcher(client: KubeClient, podUid?: string) {
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
  });
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
