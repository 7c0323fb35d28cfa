// Processes for the lab (bed and cluster) and scripts: run a command to completion, and stop a pid for sure.
import { execFile } from 'node:child_process';
import { waitFor } from '../../shared/clock.ts';

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs cmd to completion (timeoutMs 0 = no limit); never rejects: the exit code says how it went. */
export function sh(
  cmd: string[],
  opts: { input?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<ExecResult> {
  return new Promise((resolve) => {
    const [bin, ...args] = cmd as [string, ...string[]];
    const child = execFile(
      bin,
      args,
      { timeout: opts.timeoutMs ?? 30_000, maxBuffer: 64 << 20, ...(opts.env ? { env: opts.env } : {}) },
      (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
      },
    );
    child.stdin?.on('error', () => {}); // a command that does not read stdin may close it first
    child.stdin?.end(opts.input ?? '');
  });
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM, wait for the exit; SIGKILL if it does not come within timeoutMs. */
export async function killAndWait(pid: number | undefined, timeoutMs = 10_000): Promise<void> {
  if (!pid || !pidAlive(pid)) return;
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  try {
    await waitFor(`pid ${pid} to exit`, () => !pidAlive(pid), { timeoutMs, intervalMs: 50 });
  } catch {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
    await waitFor(`pid ${pid} to die`, () => !pidAlive(pid), { timeoutMs: 5_000, intervalMs: 50 });
  }
}

/**
 * How long a scene's process (a speaker, a sidecar, a candidate) may take to start (ready,
 * /readyz). Starting is not what the scenes measure, and on two cores beside two other test lanes
 * a node process has taken over 30 s to print its first line (a clean-clone run, 2026-11-29, load
 * average 11); the deadline only bounds a process that never starts.
 */
export const START_DEADLINE_MS = 120_000;
