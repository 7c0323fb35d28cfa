// docs/architecture.md's layout is where a newcomer finds a file: it names every product file, in
// the line of its own folder, and no file that is gone.
import { globSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import t from 'tap';

const ROOT = new URL('../../../', import.meta.url).pathname;

/** The layout block's lines by folder (`sidecar/l2/` → the words of its entry). */
function layout(markdown: string): Map<string, Set<string>> {
  const block = markdown.split('## Layout\n')[1]?.split('```')[1] ?? '';
  const entries = new Map<string, string>();
  let folder: string | undefined;
  for (const line of block.split('\n')) {
    const m = /^(\S+\/)\s+(.*)$/.exec(line);
    if (m) {
      folder = m[1] as string;
      entries.set(folder, m[2] as string);
    } else if (folder && line.trim()) entries.set(folder, `${entries.get(folder)} ${line.trim()}`);
  }
  return new Map([...entries].map(([k, v]) => [k, new Set(v.match(/[a-z0-9][a-z0-9-]*/g) ?? [])]));
}

t.test('the layout reader', async (t) => {
  const md = '## Layout\n\n```\na/   one, two-three\n     four\nb/c/ five\n```\n';
  t.strictSame(
    [...layout(md)].map(([k, v]) => [k, [...v]]),
    [
      ['a/', ['one', 'two-three', 'four']],
      ['b/c/', ['five']],
    ],
  );
});

t.test("docs/architecture.md's layout names every file of webhook/, sidecar/, shared/, cli/", async (t) => {
  const folders = layout(readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8'));
  const files = ['webhook', 'sidecar', 'shared', 'cli'].flatMap((d) =>
    globSync(`${d}/**/*.ts`, { cwd: ROOT }),
  );
  t.ok(files.length > 50, `${files.length} product files`);
  const unnamed = files.filter(
    (f) => !folders.get(`${dirname(f)}/`)?.has(f.split('/').pop()?.slice(0, -3) ?? ''),
  );
  t.strictSame(unnamed.sort(), [], 'each is named in the line of its folder');
  const productFolders = [...folders.keys()].filter((k) => /^(webhook|sidecar|shared|cli)\//.test(k));
  const empty = productFolders.filter((k) => !files.some((f) => `${dirname(f)}/` === k));
  t.strictSame(empty, [], 'no folder listed that has no file');
});
