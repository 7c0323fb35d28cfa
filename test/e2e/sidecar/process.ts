// The sidecar as the container runs it: `drainguard sidecar` in its own process, its output kept.
import { type ChildProcess, spawn } from 'node:child_process';

const CLI = new URL('../../../cli/drainguard.ts', import.meta.url).pathname;

export interface SidecarProcess {
  child: ChildProcess;
  /** stdout and stderr so far. */
  output: () => string;
}

/** Spawns `drainguard sidecar` with exactly this environment; `wrap` puts the command in a pod's shoes. */
export function spawnSidecar(
  env: Record<string, string | undefined>,
  wrap?: (cmd: string[]) => string[],
): SidecarProcess {
  const [bin, ...args] = (wrap ?? ((c: string[]) => c))([process.execPath, CLI, 'sidecar']) as [
    string,
    ...string[],
  ];
  const child = spawn(bin, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (d: Buffer) => {
    out += d.toString();
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return { child, output: () => out };
}

/** The HTTP status of a sidecar endpoint, 0 when nothing answers. */
export async function httpStatus(port: number, path: string): Promise<number> {
  try {
    return (await fetch(`http://127.0.0.1:${port}${path}`)).status;
  } catch {
    return 0;
  }
}
