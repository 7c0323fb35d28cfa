// node:http without `import`: any ESM import of node:http (default, named or namespace) makes Node
// evaluate its lazy WebSocket/CloseEvent/MessageEvent getters, which load undici, http2, zlib and
// perf_hooks — ~8 MiB of RSS in every sidecar for nothing it uses
// (test/unit/sidecar/builtin-modules.test.ts). Types still come from `import type`.
export const nodeHttp = process.getBuiltinModule('node:http');
