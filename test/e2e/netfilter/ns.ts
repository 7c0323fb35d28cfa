// Minimal stand-in for test/lib/netns.ts (createNamespace) until it lands on main; same shape.
import { execFile, execFileSync } from 'node:child_process';

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function sh(cmd: string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<ExecResult> {
  return new Promise((resolve) => {
    const [bin, ...args] = cmd as [string, ...string[]];
    const child = execFile(
      bin,
      args,
      { timeout: opts.timeoutMs ?? 30_000, maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
      },
    );
    child.stdin?.on('error', () => {}); // a tool that exits before reading stdin reports by exit code
    child.stdin?.end(opts.input ?? '');
  });
}

export interface Netns {
  ns: string;
  exec(cmd: string[], opts?: { input?: string; timeoutMs?: number }): Promise<ExecResult>;
  run(cmd: string[], opts?: { input?: string }): Promise<string>;
  destroy(): Promise<void>;
}

const created = new Set<string>();
let hooked = false;
let seq = 0;

export async function createNamespace(label: string): Promise<Netns> {
  if (!hooked) {
    hooked = true;
    process.on('exit', () => {
      for (const ns of created) {
        try {
          execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
        } catch {}
      }
    });
  }
  const ns = `dgnf${process.pid.toString(36)}-${(seq++).toString(36)}${label.slice(0, 8)}`;
  const r = await sh(['ip', 'netns', 'add', ns]);
  if (r.code !== 0) throw new Error(`ip netns add ${ns}: ${r.stderr}`);
  created.add(ns);
  const wrap = (cmd: string[]) => ['ip', 'netns', 'exec', ns, ...cmd];
  await sh(wrap(['ip', 'link', 'set', 'lo', 'up']));
  return {
    ns,
    exec: (cmd, opts) => sh(wrap(cmd), opts),
    async run(cmd, opts) {
      const res = await sh(wrap(cmd), opts?.input === undefined ? {} : { input: opts.input });
      if (res.code !== 0) throw new Error(`${cmd.join(' ')} failed (${res.code}): ${res.stderr.trim()}`);
      return res.stdout;
    },
    async destroy() {
      await sh(['ip', 'netns', 'del', ns]);
      created.delete(ns);
    },
  };
}
