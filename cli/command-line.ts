// What every command does with its command line: parse it strictly (a mistake prints why and the
// usage, exit 2; --help prints the usage, exit 0), say why it failed (exit 1), and reach the
// cluster its --kubeconfig and --context name.
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import { KubeClient, type KubeClientOptions } from '../shared/kube/client.ts';
import { helpFor, programName } from './program.ts';

/** The flags of every command that reads the cluster. */
export const KUBECONFIG_OPTIONS = {
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
} as const satisfies ParseArgsOptionsConfig;

const HELP_OPTION = { help: { type: 'boolean', short: 'h' } } as const satisfies ParseArgsOptionsConfig;

type Parsed<O extends ParseArgsOptionsConfig, P extends boolean> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O & typeof HELP_OPTION; strict: true; allowPositionals: P }>
>;

export class CommandLine {
  private readonly name: string;
  private readonly usage: string;
  private readonly usageAfterError: string;

  /** `usageAfterError`: the usage as printed after a mistake (default: the usage itself). */
  constructor(name: string, usage: string, usageAfterError = usage) {
    this.name = name;
    this.usage = usage;
    this.usageAfterError = usageAfterError;
  }

  /** Called wrong: why, then the usage, on stderr; returns exit code 2. */
  wrong(why: string): number {
    process.stderr.write(`${programName()} ${this.name}: ${why}\n${helpFor(this.usageAfterError)}`);
    return 2;
  }

  /** A flag's value is not accepted: why (name the flag and what it accepts), on stderr; returns exit code 2. */
  badValue(why: string): number {
    process.stderr.write(`${programName()} ${this.name}: ${why}\n`);
    return 2;
  }

  /** Failed: why, on stderr; returns exit code 1. */
  fail(why: string): number {
    process.stderr.write(`${programName()} ${this.name}: ${why}\n`);
    return 1;
  }

  /**
   * A client for the cluster --kubeconfig and --context name (kubectl's defaults otherwise), or
   * exit code 1 when there is none (said on stderr, with `hint`: what else to try).
   */
  async connect(
    flags: { kubeconfig?: string | undefined; context?: string | undefined },
    opts?: KubeClientOptions,
    hint = '',
  ): Promise<KubeClient | number> {
    try {
      // Loaded only here: a command that reads its pods from a file never loads client-node.
      const { kubeconfigAuth } = await import('../shared/kube/kubeconfig.ts');
      return new KubeClient(kubeconfigAuth({ kubeconfig: flags.kubeconfig, context: flags.context }), opts);
    } catch (e) {
      return this.fail(`${(e as Error).message}${hint}`);
    }
  }

  /** The parsed arguments (-h/--help added), or the exit code when there is nothing more to do. */
  parse<O extends ParseArgsOptionsConfig, P extends boolean = false>(
    argv: string[],
    options: O,
    allowPositionals?: P,
  ): Parsed<O, P> | number {
    let parsed: Parsed<O, P>;
    try {
      parsed = parseArgs({
        args: argv,
        options: { ...options, ...HELP_OPTION },
        strict: true,
        allowPositionals: (allowPositionals ?? false) as P,
      });
    } catch (e) {
      return this.wrong((e as Error).message);
    }
    if ((parsed.values as { help?: boolean }).help) {
      process.stdout.write(helpFor(this.usage));
      return 0;
    }
    return parsed;
  }
}
