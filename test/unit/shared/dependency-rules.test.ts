// The dependency rules of docs/architecture.md, read from the import statements of the tree:
// roles share code only through shared/, so no role imports another's internals for a name.
import { globSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import t from 'tap';

const ROOT = new URL('../../../', import.meta.url).pathname;

/** A file's relative imports (type-only ones included): the specifier and the path it names. */
function relativeImports(file: string): { spec: string; target: string }[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return [...text.matchAll(/(?:from|import\()\s*'(\.{1,2}\/[^']+)'/g)].map((m) => ({
    spec: m[1] as string,
    target: normalize(join(dirname(file), m[1] as string)),
  }));
}

/** Top-level directories a file imports from (relative imports only; packages are not roles). */
const importedDirs = (file: string): { spec: string; dir: string }[] =>
  relativeImports(file).map(({ spec, target }) => ({ spec, dir: target.split('/')[0] as string }));

const RULES: Record<string, string[]> = {
  shared: ['shared'],
  webhook: ['webhook', 'shared'],
  sidecar: ['sidecar', 'shared'],
  // The CLI starts the roles and uses the sidecar's tool runner, netfilter cleaner (its
  // netfilter-cleanup command) and drain and Lease readers; what it shares with the L2 sidecar
  // (its Node annotation's format, the fence's tables) is in shared/. Never the webhook's internals.
  cli: ['cli', 'shared', 'sidecar'],
};
/** The command dispatcher starts each role from its entry point (lazily). */
const ENTRY_POINTS: Record<string, string[]> = { 'cli/commands.ts': ['../webhook/main.ts'] };

for (const [role, allowed] of Object.entries(RULES)) {
  t.test(`${role}/ imports only ${allowed.join(', ')}`, async (t) => {
    const files = globSync(`${role}/**/*.ts`, { cwd: ROOT });
    t.ok(files.length > 0, `${role}/ has files`);
    const bad = files.flatMap((f) =>
      importedDirs(f)
        .filter((i) => !allowed.includes(i.dir) && !ENTRY_POINTS[f]?.includes(i.spec))
        .map((i) => `${f}: ${i.spec}`),
    );
    t.strictSame(bad, []);
  });
}

t.test('cli/ does not import sidecar/l2/', async (t) => {
  const bad = globSync('cli/**/*.ts', { cwd: ROOT }).flatMap((f) =>
    importedDirs(f)
      .filter((i) => normalize(join(dirname(f), i.spec)).startsWith('sidecar/l2/'))
      .map((i) => `${f}: ${i.spec}`),
  );
  t.strictSame(bad, []);
});

t.test('sidecar features never import each other', async (t) => {
  const FEATURES = ['l2', 'api-fence', 'lease', 'netfilter'];
  const featureOf = (path: string) => FEATURES.find((f) => path.startsWith(`sidecar/${f}/`));
  const bad = globSync('sidecar/**/*.ts', { cwd: ROOT }).flatMap((f) => {
    const own = featureOf(f);
    if (!own) return [];
    return relativeImports(f)
      .filter(({ target }) => {
        const other = featureOf(target);
        return other !== undefined && other !== own;
      })
      .map(({ spec }) => `${f}: ${spec}`);
  });
  t.strictSame(bad, []);
});

t.test('names used by more than one role are defined once, in shared/names.ts', async (t) => {
  const names = [
    'ANNOTATION_PREFIX',
    'INJECT_LABEL',
    'SIDECAR_NAME',
    'EXCLUDE_LABEL',
    'LABEL_OWNED_ANNOTATION',
  ];
  const defs = globSync('{webhook,sidecar,cli,shared}/**/*.ts', { cwd: ROOT }).flatMap((f) => {
    const text = readFileSync(join(ROOT, f), 'utf8');
    return names.filter((n) => new RegExp(`export const ${n}\\b`).test(text)).map((n) => `${n} in ${f}`);
  });
  t.strictSame(defs.sort(), names.map((n) => `${n} in shared/names.ts`).sort());
});

/** The product and lab files each file imports (relative imports, type-only ones included). */
function importGraph(dirs: string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of dirs.flatMap((d) => globSync(`${d}/**/*.ts`, { cwd: ROOT })))
    graph.set(
      file,
      relativeImports(file).map((i) => i.target),
    );
  return graph;
}

/** Every import cycle's files (strongly connected components of more than one file, or a self-import). */
function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v) as number, idx.get(w) as number));
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return out;
}

t.test('no import cycle among product and lab files, type imports included', async (t) => {
  t.strictSame(
    cycles(
      new Map([
        ['a', ['b']],
        ['b', ['a']],
        ['c', ['a']],
      ]),
    ),
    [['a', 'b']],
    'the check finds one',
  );
  const graph = importGraph(['shared', 'webhook', 'sidecar', 'cli', 'lab']);
  t.ok(graph.size > 100, `${graph.size} files read`);
  t.strictSame(cycles(graph), []);
});
