import { VERSION } from '../shared/names.ts';
import { COMMANDS } from './commands.ts';
import { helpFor, programName } from './program.ts';

function help(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length), 7);
  const rows = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return [
    `drainguard ${VERSION}: keeps network services reachable while nodes drain`,
    '',
    'Usage: drainguard <command> [options]',
    '',
    'Commands:',
    ...rows,
    `  ${'version'.padEnd(width)}  print the version`,
    `  ${'help'.padEnd(width)}  show this help (also --help; "drainguard <command> --help" for one command)`,
    '',
  ].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === undefined || cmd === 'help' || cmd === '--help' || cmd === '-h') {
    process.stdout.write(helpFor(help()));
    return 0;
  }
  if (cmd === 'version' || cmd === '--version') {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  const command = COMMANDS[cmd];
  if (!command) {
    process.stderr.write(
      `${programName()}: unknown command "${cmd}"; commands are ${Object.keys(COMMANDS).join(', ')}, version, help\n`,
    );
    return 2;
  }
  const mod = await command.load();
  return mod.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`drainguard: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
