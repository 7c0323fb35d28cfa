// Prints the Helm chart's values table (Markdown) from charts/drainguard/values.schema.json, its
// single source of truth: each value's path, type, default (values.yaml) and meaning.
// scripts/sync-readme.ts writes it into the README; test/unit/helm/docs.test.ts checks it.
import { readFileSync } from 'node:fs';
import YAML from 'yaml';

const CHART = new URL('../charts/drainguard/', import.meta.url);

interface Schema {
  type?: string | string[];
  description?: string;
  properties?: Record<string, Schema>;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  pattern?: string;
  items?: Schema;
}

const code = (v: unknown) => `\`${typeof v === 'string' ? (v === '' ? '""' : v) : JSON.stringify(v)}\``;

function at(values: unknown, path: string[]): unknown {
  let v = values;
  for (const k of path) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined;
  return v;
}

function accepted(s: Schema): string {
  const out: string[] = [];
  if (s.enum) out.push(`One of: ${s.enum.map(code).join(', ')}.`);
  if (s.minimum !== undefined && s.maximum !== undefined) out.push(`${s.minimum}–${s.maximum}.`);
  else if (s.minimum !== undefined) out.push(`At least ${s.minimum}.`);
  return out.length ? ` ${out.join(' ')}` : '';
}

export function helmValuesTable(): string {
  const schema = JSON.parse(readFileSync(new URL('values.schema.json', CHART), 'utf8')) as Schema;
  const values = YAML.parse(readFileSync(new URL('values.yaml', CHART), 'utf8')) as unknown;
  const rows: string[] = [];
  const walk = (s: Schema, path: string[], inherited: string) => {
    const description = s.description ?? inherited;
    // Leaves, and maps of free keys (labels, resources' requests): one row each.
    if (s.properties && path.length < 3 && !['resources', 'namespaceSelector'].includes(path.at(-1) ?? '')) {
      for (const [k, sub] of Object.entries(s.properties)) if (k !== 'global') walk(sub, [...path, k], '');
      return;
    }
    const type = Array.isArray(s.type) ? s.type.join(' or ') : (s.type ?? 'any');
    const dflt = at(values, path);
    rows.push(
      `| \`${path.join('.')}\` | ${type} | ${dflt === undefined ? '—' : code(dflt)} | ${`${description}${accepted(s)}`.replaceAll('|', '\\|')} |`,
    );
  };
  walk(schema, [], '');
  return ['| Value | Type | Default | Meaning |', '|---|---|---|---|', ...rows].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) process.stdout.write(`${helmValuesTable()}\n`);
