import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import {
  ContainerProcesses,
  containerIdOf,
  countProcesses,
  inContainer,
  type ProcFs,
  runtimeId,
} from '../../../../sidecar/drain/procs.ts';

const ID = 'd08c187c7c76802838851ecf3960b5436b217ec5509962b126f78d683ca7c40a';
const OTHER = '6a897dc87747731455fe23bef09d906294bf1dbe784501e3291ab762307e0748';

t.test('runtimeId: the ID of containerd, CRI-O and docker container IDs; nothing else', async (t) => {
  t.equal(runtimeId(`containerd://${ID}`), ID);
  t.equal(runtimeId(`cri-o://${ID}`), ID);
  t.equal(runtimeId(undefined), undefined);
  t.equal(runtimeId(''), undefined);
  t.equal(runtimeId(ID), undefined);
  t.equal(runtimeId('containerd://../etc'), undefined);
});

t.test(
  'inContainer: cgroupfs v1 (the lab cluster), systemd v2, cgroup namespaces; never a prefix match',
  async (t) => {
    const v1 = [
      `12:pids:/dglab-x-node-a/kubepods/besteffort/pod0d85/${ID}`,
      `4:cpu:/dglab-x-node-a/kubepods/besteffort/pod0d85/${ID}`,
      '1:name=systemd:/',
    ].join('\n');
    t.ok(inContainer(v1, ID));
    t.ok(!inContainer(v1, OTHER));
    t.ok(inContainer(`0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-${ID}.scope\n`, ID));
    t.ok(inContainer(`0::/kubepods.slice/kubepods-pod1.slice/crio-${ID}.scope\n`, ID));
    t.ok(inContainer(`0::/../cri-containerd-${ID}.scope\n`, ID), 'seen from another cgroup namespace');
    t.ok(!inContainer(`0::/kubepods/pod1/${ID}x\n`, ID));
    t.ok(!inContainer(`0::/\n`, ID));
  },
);

t.test('countProcesses: the leader container processes in a /proc, vanished ones ignored', async (t) => {
  const proc = t.testdir({
    '1': { cgroup: '0::/kubepods/pod1/pause\n' },
    '7': { cgroup: `0::/kubepods/pod1/${ID}\n` },
    '8': { cgroup: `0::/kubepods/pod1/${ID}\n` },
    '9': { cgroup: `0::/kubepods/pod1/${OTHER}\n` },
    '10': {}, // exited between readdir and read: no cgroup file
    self: {},
  });
  t.equal(countProcesses(ID, proc), 2);
  t.equal(countProcesses(OTHER, proc), 1);
  rmSync(join(proc, '7'), { recursive: true });
  rmSync(join(proc, '8'), { recursive: true });
  t.equal(countProcesses(ID, proc), 0);
});

t.test(
  'ContainerProcesses: after one /proc scan each check reads only the known pids; a full scan only once they are gone',
  async (t) => {
    const busy: Record<string, { cgroup: string }> = {};
    for (let pid = 100; pid < 600; pid++) busy[String(pid)] = { cgroup: `0::/kubepods/pod1/${OTHER}\n` };
    const proc = t.testdir({
      ...busy,
      '7': { cgroup: `0::/kubepods/pod1/${ID}\n` },
      '8': { cgroup: `0::/kubepods/pod1/${ID}\n` },
    });
    const reads = { dirs: 0, files: 0 };
    const fs: ProcFs = {
      readdir: (d) => {
        reads.dirs++;
        return readdirSync(d);
      },
      readFile: (p) => {
        reads.files++;
        return readFileSync(p, 'utf8');
      },
    };
    const leader = new ContainerProcesses(ID, { proc, fs });
    t.equal(leader.scan(), 2);
    reads.dirs = reads.files = 0;
    for (let i = 0; i < 40; i++) t.notOk(leader.gone());
    t.strictSame(
      reads,
      { dirs: 0, files: 80 },
      'a second of checks at 25 ms: 2 files each, no /proc listing',
    );
    rmSync(join(proc, '7'), { recursive: true });
    reads.dirs = reads.files = 0;
    t.notOk(leader.gone());
    t.strictSame(reads, { dirs: 0, files: 2 });
    // The last known one exits while a new one was started: the full scan finds it.
    rmSync(join(proc, '8'), { recursive: true });
    mkdirSync(join(proc, '9'));
    writeFileSync(join(proc, '9', 'cgroup'), `0::/kubepods/pod1/${ID}\n`);
    t.notOk(leader.gone(), 'a process started since the scan keeps the container running');
    t.equal(reads.dirs, 1);
    // A pid re-used by another container's process does not count.
    writeFileSync(join(proc, '9', 'cgroup'), `0::/kubepods/pod1/${OTHER}\n`);
    t.ok(leader.gone());
  },
);

t.test(
  'containerIdOf: the container inContainer would match, from any of its forms; none for the rest',
  async (t) => {
    for (const text of [
      `12:pids:/dglab-x-node-a/kubepods/besteffort/pod0d85/${ID}\n1:name=systemd:/`,
      `0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-${ID}.scope\n`,
      `0::/kubepods.slice/kubepods-pod1.slice/crio-${ID}.scope\n`,
      `0::/../docker-${ID}.scope\n`,
    ]) {
      t.equal(containerIdOf(text), ID, text);
      t.ok(inContainer(text, ID));
    }
    t.equal(containerIdOf('0::/kubepods/pod-x/pause\n'), undefined);
    t.equal(containerIdOf('0::/\n'), undefined);
    t.equal(containerIdOf('0::/user.slice/session-1.scope\n'), undefined);
  },
);
