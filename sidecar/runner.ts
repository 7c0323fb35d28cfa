import { spawn } from 'node:child_process';
import type { Logger } from '../shared/log.ts';

/** A failed tool call, with enough to act on: the command, exit status and stderr. */
export class ToolError extends Error {
  readonly command: string;
  readonly exitCode: number | null;
  readonly stderr: string;
  constructor(command: string, exitCode: number | null, stderr: string, why?: string) {
    super(`${command}: ${why ?? `exit ${exitCode}`}${stderr ? `: ${stderr.trim().slice(0, 500)}` : ''}`);
    this.name = 'ToolError';
    this.command = command;
    this.exitCode = exitCode;
    this.stderr = stderr;
  }
}

export interface RunOptions {
  /** Written to the tool's stdin (nft -f -, ebtables batch input). */
  input?: string;
  timeoutMs?: number;
  /** A change to the system: skipped (and recorded) when the runner is observe-only. */
  mutates?: boolean;
}

export interface RunRecord {
  tool: string;
  args: string[];
  input?: string;
  mutates: boolean;
  skipped: boolean;
  exitCode: number | null;
  ms: number;
}

export interface RunResult {
  stdout: string;
  stderr: string;
  skipped: boolean;
}

// ss: only to destroy the connections to a stale API server on this node (api-fence/guard.ts).
const ALLOWED_TOOLS = new Set(['ip', 'nft', 'ebtables', 'ebtables-restore', 'bridge', 'ss']);

/**
 * Every call of ip, nft and ebtables goes through here: one place for timeouts, clear
 * errors, observe-only mode and a record of what ran (tests and logs read it).
 */
export class ToolRunner {
  readonly observeOnly: boolean;
  readonly history: RunRecord[] = [];
  private readonly log: Logger;
  private readonly historyLimit: number;
  /** Prefix for every command, e.g. ['ip', 'netns', 'exec', 'node-a'] in tests. */
  private readonly prefix: string[];
  /** The sidecar's lifetime: once aborted, running tools are killed and none is started. */
  private readonly signal: AbortSignal | undefined;

  constructor(opts: {
    log: Logger;
    observeOnly?: boolean;
    prefix?: string[];
    historyLimit?: number;
    signal?: AbortSignal;
  }) {
    this.log = opts.log;
    this.observeOnly = opts.observeOnly ?? false;
    this.prefix = opts.prefix ?? [];
    this.historyLimit = opts.historyLimit ?? 200;
    this.signal = opts.signal;
  }

  async run(tool: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
    if (!ALLOWED_TOOLS.has(tool))
      throw new ToolError(tool, null, '', `not an allowed tool (${[...ALLOWED_TOOLS].join(', ')})`);
    const mutates = opts.mutates ?? false;
    const command = [tool, ...args].join(' ');
    const started = performance.now();
    if (mutates && this.observeOnly) {
      this.remember({ tool, args, input: opts.input, mutates, skipped: true, exitCode: null, ms: 0 });
      this.log.info({ tool, args, input: opts.input }, 'observe-only: would run');
      return { stdout: '', stderr: '', skipped: true };
    }
    if (this.signal?.aborted) throw new ToolError(command, null, '', 'not run: the sidecar is stopping');
    const [bin, ...rest] = [...this.prefix, tool, ...args] as [string, ...string[]];
    const timeoutMs = opts.timeoutMs ?? 10_000;
    const result = await new Promise<{ code: number | null; stdout: string; stderr: string; error?: Error }>(
      (resolve) => {
        const child = spawn(bin, rest, {
          stdio: ['pipe', 'pipe', 'pipe'],
          timeout: timeoutMs,
          killSignal: 'SIGKILL',
          ...(this.signal ? { signal: this.signal } : {}),
        });
        const out: Buffer[] = [];
        const err: Buffer[] = [];
        child.stdout.on('data', (c: Buffer) => out.push(c));
        child.stderr.on('data', (c: Buffer) => err.push(c));
        child.on('error', (error) => resolve({ code: null, stdout: '', stderr: '', error }));
        child.on('close', (code, signal) =>
          resolve({
            code,
            stdout: Buffer.concat(out).toString('utf8'),
            stderr: Buffer.concat(err).toString('utf8'),
            ...(signal ? { error: new Error(`killed by ${signal} (timeout ${timeoutMs} ms?)`) } : {}),
          }),
        );
        child.stdin.on('error', () => {}); // a tool that exits before reading stdin is reported by its exit code
        child.stdin.end(opts.input ?? '');
      },
    );
    const ms = Math.round(performance.now() - started);
    this.remember({ tool, args, input: opts.input, mutates, skipped: false, exitCode: result.code, ms });
    if (result.error) {
      const missing = (result.error as NodeJS.ErrnoException).code === 'ENOENT';
      throw new ToolError(
        command,
        result.code,
        result.stderr,
        missing ? `${bin} not found on PATH` : result.error.message,
      );
    }
    if (result.code !== 0) throw new ToolError(command, result.code, result.stderr);
    if (mutates) this.log.debug({ tool, args, ms }, 'ran');
    return { stdout: result.stdout, stderr: result.stderr, skipped: false };
  }

  private remember(r: RunRecord): void {
    this.history.push(r);
    if (this.history.length > this.historyLimit)
      this.history.splice(0, this.history.length - this.historyLimit);
  }
}
