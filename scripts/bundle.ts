// Bundles the CLI into dist/ with esbuild: one entry, code-split so each subcommand loads only
// what it uses (the sidecar runs on every node; its memory is multiplied by the cluster).
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { build } from 'esbuild';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
};
// Start empty: chunk names carry content hashes, so old chunks would otherwise pile up.
rmSync(new URL('../dist', import.meta.url), { recursive: true, force: true });
await build({
  entryPoints: { drainguard: 'cli/drainguard.ts' },
  outdir: 'dist',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node24',
  outExtension: { '.js': '.mjs' },
  chunkNames: 'chunks/[name]-[hash]',
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: 'none',
  logLevel: 'warning',
  define: { __DRAINGUARD_VERSION__: JSON.stringify(pkg.version) },
  // CommonJS dependencies (pino, node-forge) call require(); give the ESM bundle one.
  banner: {
    js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
  },
});
// kubectl's plugin: copied onto PATH as kubectl-drainguard, `kubectl drainguard …` runs the bundle
// under that name (cli/program.ts: help in kubectl's style).
writeFileSync(
  new URL('../dist/kubectl-drainguard', import.meta.url),
  "#!/usr/bin/env node\nprocess.env.DRAINGUARD_PROGRAM ??= 'kubectl drainguard';\nawait import('./drainguard.mjs');\n",
  { mode: 0o755 },
);
process.stdout.write('built dist/drainguard.mjs, dist/kubectl-drainguard\n');
