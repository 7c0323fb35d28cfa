import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { countProcesses, inContainer, runtimeId } from '../../../sidecar/lease/procs.ts';

const ID = 'd08c187c7c76802838851ecf3960b5436b217ec5509962b126f78d683ca7c40a';
const OTHER = '6a897dc87747731455fe23bef09d906294bf1dbe784501e3291ab762307e0748';

test('runtimeId: the ID of containerd, CRI-O and docker container IDs; nothing else', () => {
  assert.equal(runtimeId(`containerd://${ID}`), ID);
  assert.equal(runtimeId(`cri-o://${ID}`), ID);
  assert.equal(runtimeId(undefined), undefined);
  assert.equal(runtimeId(''), undefined);
  assert.equal(runtimeId(ID), undefined);
  assert.equal(runtimeId('containerd://../etc'), undefined);
});

test('inContainer: cgroupfs v1 (the lab cluster), systemd v2, cgroup namespaces; never a prefix match', () => {
  const v1 = [
    `12:pids:/dglab-x-node-a/kubepods/besteffort/pod0d85/${ID}`,
    `4:cpu:/dglab-x-node-a/kubepods/besteffort/pod0d85/${ID}`,
    '1:name=systemd:/',
  ].join('\n');
  assert.ok(inContainer(v1, ID));
  assert.ok(!inContainer(v1, OTHER));
  assert.ok(inContainer(`0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-${ID}.scope\n`, ID));
  assert.ok(inContainer(`0::/kubepods.slice/kubepods-pod1.slice/crio-${ID}.scope\n`, ID));
  assert.ok(inContainer(`0::/../cri-containerd-${ID}.scope\n`, ID), 'seen from another cgroup namespace');
  assert.ok(!inContainer(`0::/kubepods/pod1/${ID}x\n`, ID));
  assert.ok(!inContainer(`0::/\n`, ID));
});

test('countProcesses: the leader container processes in a /proc, vanished ones ignored', () => {
  const proc = mkdtempSync(join(tmpdir(), 'dg-proc-'));
  try {
    const pid = (n: number, cgroup: string) => {
      mkdirSync(join(proc, String(n)));
      writeFileSync(join(proc, String(n), 'cgroup'), cgroup);
    };
    pid(1, '0::/kubepods/pod1/pause\n');
    pid(7, `0::/kubepods/pod1/${ID}\n`);
    pid(8, `0::/kubepods/pod1/${ID}\n`);
    pid(9, `0::/kubepods/pod1/${OTHER}\n`);
    mkdirSync(join(proc, '10')); // exited between readdir and read: no cgroup file
    mkdirSync(join(proc, 'self'));
    assert.equal(countProcesses(ID, proc), 2);
    assert.equal(countProcesses(OTHER, proc), 1);
    rmSync(join(proc, '7'), { recursive: true });
    rmSync(join(proc, '8'), { recursive: true });
    assert.equal(countProcesses(ID, proc), 0);
  } finally {
    rmSync(proc, { recursive: true, force: true });
  }
});
