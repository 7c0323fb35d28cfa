// No container engine here: replay the Dockerfile's steps in temporary directories (the build
// stage's COPY/RUN for real, the runtime stage's COPY --from into a fake root) and run the
// entrypoint from there, far from any node_modules, to prove the runtime layout works.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';

const repo = join(import.meta.dirname, '../../..');

interface Step {
  op: string;
  args: string;
}
function stages(text: string): { from: string; name?: string; steps: Step[] }[] {
  const lines = text.replace(/\\\n/g, ' ').split('\n');
  const out: { from: string; name?: string; steps: Step[] }[] = [];
  for (const raw of lines) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const [op, ...rest] = line.split(/\s+/);
    const args = rest.join(' ');
    if (op === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args)!;
      out.push({ from: m[1]!, ...(m[2] ? { name: m[2] } : {}), steps: [] });
    } else out.at(-1)!.steps.push({ op: op!, args });
  }
  return out;
}

test('Dockerfile: build stage bundles, runtime layout runs `drainguard --help` without node_modules', async () => {
  const df = readFileSync(join(repo, 'Dockerfile'), 'utf8');
  const [build, runtime] = stages(df);
  assert.ok(build && runtime, 'two stages');
  assert.equal(runtime.from, 'node:24-bookworm-slim');
  const tmp = mkdtempSync(join(tmpdir(), 'dg-docker-'));
  const ignore = readFileSync(join(repo, '.dockerignore'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const nodeBin = dirname(
    execFileSync('bash', [join(repo, 'scripts/node24.sh')], { encoding: 'utf8' }).trim(),
  );
  const env = { ...process.env, PATH: `${nodeBin}:${process.env.PATH}` };
  try {
    // Build stage: WORKDIR /src → tmp/src; COPY from the context (minus .dockerignore); RUN for real.
    const roots: Record<string, string> = {
      [build.name ?? 'build']: join(tmp, 'build'),
      runtime: join(tmp, 'runtime'),
    };
    let cwd = roots.build!;
    const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard'], {
      cwd: repo,
      encoding: 'utf8',
    })
      .split('\n')
      .filter((f) => f && !ignore.some((i) => f === i || f.startsWith(`${i}/`)) && existsSync(join(repo, f)));
    for (const s of build.steps) {
      if (s.op === 'WORKDIR') {
        cwd = join(roots.build!, s.args);
        mkdirSync(cwd, { recursive: true });
      } else if (s.op === 'COPY') {
        const parts = s.args.split(/\s+/);
        const dest = parts.pop()!;
        for (const src of parts) {
          const picked = src === '.' ? files : files.filter((f) => f === src);
          assert.ok(picked.length > 0, `COPY ${src}: nothing in the context`);
          for (const f of picked) cpSync(join(repo, f), join(cwd, dest, f), { recursive: true });
        }
      } else if (s.op === 'RUN') {
        execFileSync('bash', ['-c', s.args], { cwd, env, stdio: 'pipe' });
      }
    }
    // Runtime stage: COPY --from=build into a fake root; apt packages must exist in Debian.
    cwd = roots.runtime!;
    let entrypoint: string[] = [];
    for (const s of runtime.steps) {
      if (s.op === 'RUN' && s.args.includes('apt-get install')) {
        const pkgs = /apt-get install ([^&]+)/
          .exec(s.args)![1]!
          .split(/\s+/)
          .filter((p) => p && !p.startsWith('-'));
        assert.deepEqual(pkgs.sort(), ['iproute2', 'iptables', 'nftables']);
        for (const p of pkgs) execFileSync('apt-cache', ['show', p], { stdio: 'pipe' });
      } else if (s.op === 'WORKDIR') {
        cwd = join(roots.runtime!, s.args);
        mkdirSync(cwd, { recursive: true });
      } else if (s.op === 'COPY') {
        const m = /^--from=(\S+)\s+(\S+)\s+(\S+)$/.exec(s.args);
        assert.ok(m, `runtime COPY must come from the build stage: ${s.args}`);
        cpSync(join(roots[m[1]!]!, m[2]!), join(roots.runtime!, m[3]!), { recursive: true });
      } else if (s.op === 'ENTRYPOINT') entrypoint = JSON.parse(s.args) as string[];
    }
    assert.deepEqual(entrypoint, ['drainguard']);
    const bin = join(roots.runtime!, 'usr/local/bin/drainguard');
    const run = (args: string[]) =>
      execFileSync(bin, args, {
        cwd: '/',
        env: { ...env, DRAINGUARD_APP: join(roots.runtime!, 'app') },
        encoding: 'utf8',
      });
    const help = run(['--help']);
    assert.match(help, /webhook\s+serve the mutating admission webhook/);
    assert.match(help, /sidecar\s+run the drain-aware sidecar/);
    assert.match(run(['webhook', '--help']), /--tls-cert-dir/);
    assert.match(run(['sidecar', '--help']), /DRAINGUARD_PROFILE/);
    assert.ok(!existsSync(join(roots.runtime!, 'app/node_modules')));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
