// The guarded container's stops while its pod stays (sidecar/drain/guarded.ts): what counts as a
// stop, and what as a new container serving again. Plain statuses and times in, the track out.
import t from 'tap';
import type { ContainerStatus } from '../../../../shared/kube/types.ts';
import {
  GUARDED_REJOIN_MS,
  type GuardedTrack,
  guardedRecheckAt,
  guardedStopping,
  noGuardedTrack,
  trackGuarded,
} from '../../../../sidecar/drain/guarded.ts';

const st = (
  id: string | undefined,
  restartCount: number,
  state: 'running' | 'terminated' | 'waiting',
  ready = state === 'running',
): ContainerStatus => ({
  name: 'speaker',
  ...(id ? { containerID: `containerd://${id}` } : {}),
  restartCount,
  ready,
  state:
    state === 'running'
      ? { running: {} }
      : state === 'terminated'
        ? { terminated: { exitCode: 137 } }
        : { waiting: {} },
});

/** What each step said is stopped (its why, or null); each status at `[status, ms]` (default 0). */
function run(
  steps: (ContainerStatus | undefined | [ContainerStatus | undefined, number])[],
  podGoing = false,
) {
  let track: GuardedTrack = noGuardedTrack;
  return steps.map((step) => {
    const [s, at] = Array.isArray(step) ? step : [step, 0];
    track = trackGuarded(track, s, podGoing, at);
    return track.stopped?.why ?? null;
  });
}
const R = GUARDED_REJOIN_MS;

t.test('a container never seen serving (the pod starting) is no stop', async (t) => {
  t.strictSame(
    run([undefined, st(undefined, 0, 'waiting'), st('a', 0, 'running', false), st('a', 0, 'running')]),
    [null, null, null, null],
  );
});

t.test(
  'killed and restarted after a back-off: stopped from the kill until the new container has served GUARDED_REJOIN_MS',
  async (t) => {
    const stopped = 'container speaker stopped';
    t.strictSame(
      run([
        [st('a', 0, 'running'), 0],
        [st('a', 0, 'terminated'), 1_000],
        [st('a', 1, 'waiting'), 2_000], // CrashLoopBackOff
        [st('b', 1, 'running', false), 12_000],
        [st('b', 1, 'running'), 13_000],
        [st('b', 1, 'running'), 13_000 + R - 1],
        [st('b', 1, 'running'), 13_000 + R],
      ]),
      [null, stopped, stopped, stopped, stopped, stopped, null],
    );
  },
);

t.test(
  'a new container that fails again before GUARDED_REJOIN_MS: the wait starts over (a crash loop stays handed over)',
  async (t) => {
    let track = trackGuarded(noGuardedTrack, st('a', 0, 'running'), false, 0);
    track = trackGuarded(track, st('a', 0, 'terminated'), false, 1);
    track = trackGuarded(track, st('b', 1, 'running'), false, 100);
    t.equal(guardedRecheckAt(track), 100 + R, 'a look is due when the wait ends');
    track = trackGuarded(track, st('b', 1, 'terminated'), false, 200);
    t.ok(track.stopped);
    t.equal(guardedRecheckAt(track), undefined, 'nothing to wait for');
    track = trackGuarded(track, st('c', 2, 'running'), false, 300);
    track = trackGuarded(track, st('c', 2, 'running'), false, 300 + R - 1);
    t.ok(track.stopped, 'the wait counts from the new start');
    track = trackGuarded(track, st('c', 2, 'running'), false, 300 + R);
    t.equal(track.stopped, undefined);
  },
);

t.test('restarted at once, seen running but not ready: stopped; seen ready at once: nothing', async (t) => {
  t.strictSame(run([st('a', 0, 'running'), st('b', 1, 'running', false)]), [
    null,
    'container speaker restarted, not ready yet',
  ]);
  t.strictSame(
    run([st('a', 0, 'running'), st('b', 1, 'running')]),
    [null, null],
    'the restart was over before we saw it',
  );
});

t.test(
  'a readiness flap of the same container is no stop (the speaker announces whatever its readiness)',
  async (t) => {
    t.strictSame(run([st('a', 0, 'running'), st('a', 0, 'running', false), st('a', 0, 'running')]), [
      null,
      null,
      null,
    ]);
  },
);

t.test('while the pod goes away the stop is the terminating handover, not this one', async (t) => {
  t.strictSame(run([st('a', 0, 'running'), st('a', 0, 'terminated')], true), [null, null]);
});

t.test(
  'the preStop hook of a restart: stopped now, until a new container serves (the old one still serving is not it)',
  async (t) => {
    let track = trackGuarded(noGuardedTrack, st('a', 0, 'running'), false, 0);
    track = guardedStopping(track, st('a', 0, 'running'), 'speaker');
    t.equal(track.stopped?.why, 'container speaker restarting (preStop hook)');
    track = trackGuarded(track, st('a', 0, 'running'), false, R * 2);
    t.ok(track.stopped, 'the hooked container, still running, serves nothing new');
    track = trackGuarded(track, st('a', 0, 'terminated'), false, R * 2);
    track = trackGuarded(track, st('b', 1, 'running'), false, R * 3);
    t.ok(track.stopped, 'the new container serves, not long enough yet');
    track = trackGuarded(track, st('b', 1, 'running'), false, R * 4);
    t.equal(track.stopped, undefined, 'the new container has served GUARDED_REJOIN_MS');
    // A hook while already stopped keeps the first stop.
    const stopped = trackGuarded(
      trackGuarded(noGuardedTrack, st('a', 0, 'running'), false, 0),
      st('a', 0, 'terminated'),
      false,
      0,
    );
    t.equal(guardedStopping(stopped, st('a', 0, 'terminated'), 'speaker'), stopped);
  },
);

t.test(
  'a hook before any status was read: the first status read names the stopping container (it is not a new one)',
  async (t) => {
    let track = guardedStopping(noGuardedTrack, undefined, 'speaker');
    track = trackGuarded(track, st('a', 0, 'running'), false, 0);
    track = trackGuarded(track, st('a', 0, 'running'), false, R * 2);
    t.ok(track.stopped, 'the old container, blocked in its hook, does not end the stop');
    track = trackGuarded(track, st('b', 1, 'running'), false, R * 2);
    track = trackGuarded(track, st('b', 1, 'running'), false, R * 3);
    t.equal(track.stopped, undefined);
  },
);

t.test(
  'first seen not running after restarts (this sidecar restarted meanwhile): stopped until a container serves; running but not ready then is a flap',
  async (t) => {
    const why = 'container speaker not running after 2 restart(s)';
    t.strictSame(
      run([
        [st('b', 2, 'waiting'), 0],
        [st('c', 3, 'running', false), 1],
        [st('c', 3, 'running'), 2],
        [st('c', 3, 'running'), 2 + R],
      ]),
      [why, why, why, null],
    );
    t.strictSame(run([st('b', 2, 'running', false), st('b', 2, 'running')]), [null, null]);
  },
);
