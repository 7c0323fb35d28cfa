// The lab images inside containerd. Importing ~1 GiB of archives into three containerds took 46 s
// per cluster start here; instead they are imported once into a "golden" containerd root, cached by
// the archives' content keys, and each node's root is a hard-linked copy of it (content blobs and
// committed snapshots are never written in place; the metadata databases are copied for real).

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { waitFor } from '../../shared/clock.ts';
import { killAndWait, sh } from '../bed/proc.ts';
import { CONTAINERD_VERSION, cacheDir, containerdBinDir, containerdEnv } from '../versions.ts';

export interface ImageList {
  images: { name: string; tar: string; bytes: number }[];
}

/** A containerd root holding every image of the list (built once per list, then reused). */
export async function goldenRoot(list: ImageList): Promise<string> {
  const key = createHash('sha256')
    // A root is containerd's own format: another containerd version writes another one.
    .update([CONTAINERD_VERSION, ...list.images.map((i) => i.tar)].join('\n'))
    .digest('hex')
    .slice(0, 16);
  const base = join(cacheDir(), 'containerd-golden');
  const root = join(base, key);
  if (existsSync(join(root, '.complete'))) return root;
  mkdirSync(base, { recursive: true });
  const work = `${root}.tmp-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(join(work, 'state'), { recursive: true });
  const sock = join(work, 'containerd.sock');
  const config = join(work, 'containerd.toml');
  writeFileSync(
    config,
    `version = 3\nroot = "${work}/root"\nstate = "${work}/state"\ndisabled_plugins = ["io.containerd.nri.v1.nri"]\n[grpc]\n  address = "${sock}"\n[ttrpc]\n  address = "${sock}.ttrpc"\n`,
  );
  const child = spawn(join(containerdBinDir(), 'containerd'), ['--config', config], {
    stdio: 'ignore',
    detached: true,
    env: containerdEnv(),
  });
  try {
    const ctr = (args: string[]) =>
      sh([join(containerdBinDir(), 'ctr'), '--address', sock, '--namespace', 'k8s.io', ...args], {
        timeoutMs: 600_000,
      });
    await waitFor('golden containerd answers', async () => (await ctr(['version'])).code === 0, {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    for (const img of list.images) {
      const r = await ctr(['images', 'import', img.tar]);
      if (r.code !== 0) throw new Error(`ctr images import ${img.tar}: ${r.stderr.trim()}`);
    }
  } finally {
    await killAndWait(child.pid);
  }
  rmSync(join(work, 'state'), { recursive: true, force: true });
  for (const old of readdirSync(base))
    if (old !== key && !old.includes('.tmp-')) rmSync(join(base, old), { recursive: true, force: true });
  writeFileSync(join(work, 'root', '.complete'), '');
  rmSync(root, { recursive: true, force: true });
  renameSync(join(work, 'root'), root);
  rmSync(work, { recursive: true, force: true });
  return root;
}

/** A node's containerd root: hard links to the golden root, with private copies of its databases. */
export async function cloneRoot(golden: string, dest: string): Promise<void> {
  rmSync(dest, { recursive: true, force: true });
  let r = await sh(['cp', '-al', golden, dest], { timeoutMs: 120_000 });
  // Hard links need one filesystem; elsewhere a full copy still works, only slower.
  if (r.code !== 0) {
    rmSync(dest, { recursive: true, force: true });
    r = await sh(['cp', '-a', golden, dest], { timeoutMs: 600_000 });
  }
  if (r.code !== 0) throw new Error(`cp -a ${golden} ${dest}: ${r.stderr.trim()}`);
  const walk = (d: string) => {
    for (const e of readdirSync(d)) {
      const p = join(d, e);
      const s = statSync(p);
      if (s.isDirectory()) {
        if (e !== 'snapshots' && e !== 'blobs') walk(p);
      } else if (e.endsWith('.db')) {
        rmSync(p);
        cpSync(join(golden, p.slice(dest.length)), p);
      }
    }
  };
  walk(dest);
  rmSync(join(dest, '.complete'), { force: true });
}
