// RFC 6902 JSON Patch, the format of the planner's answer: building paths (RFC 6901 escaping) and
// applying patches (tests and fuzz). Small on purpose: only add/replace/remove/test are produced or needed.

export interface PatchOp {
  op: 'add' | 'replace' | 'remove' | 'test';
  path: string;
  value?: unknown;
}

/** RFC 6901: `~` becomes `~0` first, then `/` becomes `~1` (the other order would corrupt `/`). */
export const escapePointer = (token: string): string => token.replace(/~/g, '~0').replace(/\//g, '~1');
export const unescapePointer = (token: string): string => token.replace(/~1/g, '/').replace(/~0/g, '~');

export const pointer = (...tokens: (string | number)[]): string =>
  tokens.map((t) => `/${escapePointer(String(t))}`).join('');

export class PatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PatchError';
  }
}

type Json = unknown;

function parse(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw new PatchError(`path ${JSON.stringify(path)} must start with /`);
  return path.slice(1).split('/').map(unescapePointer);
}

const isContainer = (v: unknown): v is Record<string, unknown> | unknown[] =>
  typeof v === 'object' && v !== null;

/** Applies a patch to a deep copy of doc; throws PatchError when any op does not apply. */
export function applyPatch<T>(doc: T, ops: readonly PatchOp[]): T {
  let root: Json = structuredClone(doc);
  for (const op of ops) {
    const tokens = parse(op.path);
    if (tokens.length === 0) {
      if (op.op === 'add' || op.op === 'replace') root = structuredClone(op.value);
      else throw new PatchError(`${op.op} on the whole document is not supported`);
      continue;
    }
    let parent: Json = root;
    for (const t of tokens.slice(0, -1)) {
      if (Array.isArray(parent)) parent = parent[Number(t)];
      else if (isContainer(parent)) parent = (parent as Record<string, unknown>)[t];
      else parent = undefined;
      if (!isContainer(parent)) throw new PatchError(`${op.op} ${op.path}: parent of ${t} does not exist`);
    }
    const last = tokens[tokens.length - 1] as string;
    if (!isContainer(parent)) throw new PatchError(`${op.op} ${op.path}: parent does not exist`);
    if (Array.isArray(parent)) {
      const idx = last === '-' ? parent.length : /^(0|[1-9]\d*)$/.test(last) ? Number(last) : Number.NaN;
      if (Number.isNaN(idx)) throw new PatchError(`${op.op} ${op.path}: ${last} is not an array index`);
      if (op.op === 'add') {
        if (idx > parent.length) throw new PatchError(`add ${op.path}: index ${idx} out of range`);
        parent.splice(idx, 0, structuredClone(op.value));
      } else {
        if (idx >= parent.length) throw new PatchError(`${op.op} ${op.path}: index ${idx} out of range`);
        if (op.op === 'replace') parent[idx] = structuredClone(op.value);
        else if (op.op === 'remove') parent.splice(idx, 1);
        else if (JSON.stringify(parent[idx]) !== JSON.stringify(op.value))
          throw new PatchError(`test ${op.path} failed`);
      }
      continue;
    }
    const obj = parent as Record<string, unknown>;
    if (op.op === 'add') obj[last] = structuredClone(op.value);
    else {
      if (!Object.hasOwn(obj, last)) throw new PatchError(`${op.op} ${op.path}: ${last} does not exist`);
      if (op.op === 'replace') obj[last] = structuredClone(op.value);
      else if (op.op === 'remove') delete obj[last];
      else if (JSON.stringify(obj[last]) !== JSON.stringify(op.value))
        throw new PatchError(`test ${op.path} failed`);
    }
  }
  return root as T;
}
