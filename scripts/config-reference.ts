// Prints the sidecar environment reference (Markdown) from the contract, the single source of truth:
// each variable, the pod annotation that sets it, its default and what it accepts.
// A unit test checks the README carries exactly this table.
import { CONTRACT } from '../shared/contract.ts';

export function configReference(): string {
  const rows = CONTRACT.map((v) => {
    const dflt = v.required ? '*(required)*' : v.default ? `\`${v.default}\`` : '—';
    const accepted = v.accepted ? ` One of: ${v.accepted.map((a) => `\`${a}\``).join(', ')}.` : '';
    const annotation = v.annotation ? `\`${v.annotation}\`` : '—';
    return `| \`${v.env}\` | ${annotation} | ${dflt} | ${v.description}${accepted} |`;
  });
  return ['| Variable | Pod annotation | Default | Meaning |', '|---|---|---|---|', ...rows].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) process.stdout.write(`${configReference()}\n`);
