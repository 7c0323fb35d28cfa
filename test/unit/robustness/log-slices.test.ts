// A trial keeps only the lines the control plane wrote during it (test/robustness/log-slices.ts).
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { keepLogsSince, logSizes } from '../../../test/robustness/log-slices.ts';

t.test("each log's lines written since the sizes were taken, by component", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'log-slices-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const files = {
    'kube-apiserver': join(dir, 'apiserver.log'),
    'cp-1/etcd': join(dir, 'etcd-cp-1.log'),
    'kube-scheduler': join(dir, 'not-yet.log'),
  };
  writeFileSync(files['kube-apiserver'], 'before the trial\n');
  writeFileSync(files['cp-1/etcd'], 'old\nolder\n');
  const sizes = logSizes(files);
  t.strictSame(sizes, { 'kube-apiserver': 17, 'cp-1/etcd': 10, 'kube-scheduler': 0 });
  appendFileSync(files['kube-apiserver'], 'Trace[1]: "Patch" total time: 846ms\n');
  writeFileSync(files['cp-1/etcd'], 'rotated\n');
  const out = join(dir, 'trial-0-logs', 'control-plane');
  keepLogsSince(files, sizes, out);
  t.equal(readFileSync(join(out, 'kube-apiserver.log'), 'utf8'), 'Trace[1]: "Patch" total time: 846ms\n');
  t.equal(readFileSync(join(out, 'cp-1', 'etcd.log'), 'utf8'), 'rotated\n', 'a log that shrank: kept whole');
  t.notOk(existsSync(join(out, 'kube-scheduler.log')), 'a log that does not exist: nothing');
});
