// A short, readable diff of what the webhook changed in a pod: flattened paths, added (+),
// changed (~) and removed (-) leaves. Pure; the demo prints the first lines of it.

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function flatten(v: unknown, path: string, out: Map<string, string>): void {
  if (Array.isArray(v)) {
    if (v.length === 0) out.set(path, '[]');
    // Containers and env vars are keyed by name: positions shift when the webhook inserts one.
    v.forEach((item, i) => {
      const name =
        item && typeof item === 'object' && 'name' in item ? String((item as { name: unknown }).name) : null;
      flatten(item, `${path}[${name ?? i}]`, out);
    });
  } else if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>);
    if (entries.length === 0) out.set(path, '{}');
    for (const [k, x] of entries) flatten(x, path ? `${path}.${k}` : k, out);
  } else out.set(path, JSON.stringify(v as Json));
}

export interface DiffLine {
  op: '+' | '-' | '~';
  path: string;
  value: string;
}

export function podDiff(
  before: unknown,
  after: unknown,
  ignore: (path: string) => boolean = () => false,
): DiffLine[] {
  const a = new Map<string, string>();
  const b = new Map<string, string>();
  flatten(before, '', a);
  flatten(after, '', b);
  const out: DiffLine[] = [];
  for (const [p, v] of b) {
    if (ignore(p)) continue;
    if (!a.has(p)) out.push({ op: '+', path: p, value: v });
    else if (a.get(p) !== v) out.push({ op: '~', path: p, value: `${a.get(p)} → ${v}` });
  }
  for (const [p, v] of a) if (!b.has(p) && !ignore(p)) out.push({ op: '-', path: p, value: v });
  return out;
}

/** Collapses leaves under one container/env entry into one line per entry, for a short listing. */
export function summarize(lines: DiffLine[], maxLines: number): string[] {
  const groups = new Map<string, { op: string; n: number; first: DiffLine }>();
  for (const l of lines) {
    const m = /^(.*?\[[^\]]+\])/.exec(l.path);
    const key = `${l.op}${m ? m[1] : l.path}`;
    const g = groups.get(key);
    if (g) g.n++;
    else groups.set(key, { op: l.op, n: 1, first: l });
  }
  const out = [...groups.entries()].map(([key, g]) =>
    g.n === 1 ? `${g.op} ${g.first.path} = ${g.first.value}` : `${g.op} ${key.slice(1)} (${g.n} fields)`,
  );
  return out.length > maxLines ? [...out.slice(0, maxLines), `  … ${out.length - maxLines} more`] : out;
}
