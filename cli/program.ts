// The name the CLI runs under, and its help text for that name: `drainguard`, or kubectl's plugin
// `kubectl drainguard` (kubectl runs an executable kubectl-drainguard found on PATH). Apart from
// command-line.ts so the top-level help loads nothing else.
/** The program name: "kubectl drainguard" when run as kubectl's plugin (bin/kubectl-drainguard sets it). */
export function programName(env: NodeJS.ProcessEnv = process.env, argv1 = process.argv[1] ?? ''): string {
  if (env.DRAINGUARD_PROGRAM) return env.DRAINGUARD_PROGRAM;
  return /(^|\/)kubectl-drainguard(\.m?js)?$/.test(argv1) ? 'kubectl drainguard' : 'drainguard';
}

/**
 * Help text for the program it runs as. As kubectl's plugin, in kubectl's style: the description
 * first, then "Usage:" with the command indented on its own line, "Options:" over the flags, and
 * every command line spelt `kubectl drainguard …` (annotation names such as drainguard.io/… stay).
 */
export function helpFor(text: string, program = programName()): string {
  if (program === 'drainguard') return text;
  const commands =
    /(^|[\s"'(`])drainguard (?=<command>|(status|reset|netfilter-cleanup|sidecar|webhook|version|help)\b)/g;
  const lines = text.replace(commands, `$1${program} `).split('\n');
  const at = lines.findIndex((l) => l.startsWith('Usage: '));
  if (at < 0) return lines.join('\n');
  const usage = ['Usage:', `  ${(lines[at] as string).slice('Usage: '.length)}`];
  const before = lines.slice(0, at);
  let after = lines.slice(at + 1);
  // "Usage: …" then a description paragraph: the description goes first, as kubectl prints it.
  if (before.every((l) => l.trim() === '') && after[0] === '' && after[1] && !after[1].startsWith('  ')) {
    const end = after.indexOf('', 1);
    const paragraph = after.slice(1, end < 0 ? after.length : end);
    after = after.slice(end < 0 ? after.length : end);
    return [...paragraph, '', ...usage, ...withOptionsHeading(after)].join('\n');
  }
  return [...before, ...usage, ...withOptionsHeading(after)].join('\n');
}

/** "Options:" over the first block of flag lines (lines starting "  -"), as kubectl heads them. */
function withOptionsHeading(lines: string[]): string[] {
  const first = lines.findIndex((l) => /^ {2}-/.test(l));
  if (first < 0 || lines.some((l) => /^(Options|Flags):/.test(l))) return lines;
  return [...lines.slice(0, first), 'Options:', ...lines.slice(first)];
}
