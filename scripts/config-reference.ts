// Prints the sidecar environment reference (Markdown) from the contract, the single source of truth.
// A unit test checks the README carries exactly this table.
import { CONTRACT } from '../shared/contract.ts';

export function configReference(): string {
  const rows = CONTRACT.map((v) => {
    const dflt = v.required ? '*(required)*' : v.default ? `\`${v.default}\`` : '—';
    const accepted = v.accepted ? ` One of: ${v.accepted.map((a) => `\`${a}\``).join(', ')}.` : '';
    return `| \`${v.env}\` | ${dflt} | ${v.description}${accepted} |`;
  });
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) process.stdout.write(`${configReference()}\n`);
