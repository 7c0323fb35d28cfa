// The part of a long-running log written during one trial: the control plane's logs grow over the
// whole run, and a trial keeps only its own lines (the sizes before it, the bytes after).
import { closeSync, mkdirSync, openSync, readSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** Each log's size now (0 when it does not exist yet). */
export function logSizes(files: Record<string, string>): Record<string, number> {
  const sizes: Record<string, number> = {};
  for (const [name, path] of Object.entries(files)) {
    try {
      sizes[name] = statSync(path).size;
    } catch {
      sizes[name] = 0;
    }
  }
  return sizes;
}

/** Writes what each log gained since `sizes` to `<dir>/<name>.log`; a log that shrank is kept whole. */
export function keepLogsSince(
  files: Record<string, string>,
  sizes: Record<string, number>,
  dir: string,
): void {
  for (const [name, path] of Object.entries(files)) {
    let fd: number;
    try {
      fd = openSync(path, 'r');
    } catch {
      continue;
    }
    try {
      const size = statSync(path).size;
      const from = (sizes[name] ?? 0) <= size ? (sizes[name] ?? 0) : 0;
      const buf = Buffer.alloc(size - from);
      readSync(fd, buf, 0, buf.length, from);
      const out = join(dir, `${name}.log`);
      mkdirSync(dirname(out), { recursive: true });
      writeFileSync(out, buf);
    } finally {
      closeSync(fd);
    }
  }
}
