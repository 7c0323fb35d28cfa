// The webhook's shape, read from its import statements: plan/ is the whole planner (pure: no
// I/O, nothing of the webhook outside plan/), and no module of webhook/ imports itself round a cycle.
import { globSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import t from 'tap';

const ROOT = new URL('../../../', import.meta.url).pathname;

/** Every import specifier of a file, relative ones resolved against the repository root. */
function imports(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return [...text.matchAll(/(?:from|import\()\s*'([^']+)'/g)].map((m) => {
    const spec = m[1] as string;
    return spec.startsWith('.') ? normalize(join(dirname(file), spec)) : spec;
  });
}

const files = globSync('webhook/**/*.ts', { cwd: ROOT });

t.test(
  'plan/ imports only plan/ and the pure contract, names and interface-name rule of shared/',
  async (t) => {
    // The interface-name rule is the L2 fence's too: admission accepts exactly what the fence takes.
    const allowed = (i: string) =>
      i.startsWith('webhook/plan/') ||
      i === 'shared/contract.ts' ||
      i === 'shared/contract-values.ts' ||
      i === 'shared/contract-env.ts' ||
      i === 'shared/names.ts' ||
      i === 'shared/net/interface-name.ts';
    const bad = files
      .filter((f) => f.startsWith('webhook/plan/'))
      .flatMap((f) =>
        imports(f)
          .filter((i) => !allowed(i))
          .map((i) => `${f}: ${i}`),
      );
    t.strictSame(bad, []);
  },
);

t.test('no import cycle in webhook/', async (t) => {
  const graph = new Map(files.map((f) => [f, imports(f).filter((i) => i.startsWith('webhook/'))]));
  const cycles: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const visit = (f: string, path: string[]) => {
    state.set(f, 'open');
    for (const next of graph.get(f) ?? []) {
      if (state.get(next) === 'open') cycles.push([...path.slice(path.indexOf(next)), f, next].join(' → '));
      else if (!state.has(next)) visit(next, [...path, f]);
    }
    state.set(f, 'done');
  };
  for (const f of files) if (!state.has(f)) visit(f, []);
  t.strictSame(cycles, []);
});
