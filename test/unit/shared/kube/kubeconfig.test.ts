// Kubeconfig loading as kubectl does it (merge, relative paths, checks), on files only: no API server.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { stringify } from 'yaml';
import {
  kubeConfigAuth,
  kubeconfigAuth,
  kubeconfigFiles,
  loadKubeConfig,
} from '../../../../shared/kube/kubeconfig.ts';

const PLUGIN = new URL('../../../e2e/cli/exec-plugin.sh', import.meta.url).pathname;

/** A fresh directory for one test (t.testdir: removed after it), and a writer of kubeconfig files in it. */
function fixture(t: Test) {
  const dir = t.testdir();
  const file = (name: string, doc: Record<string, unknown> | string): string => {
    const p = join(dir, name);
    mkdirSync(join(p, '..'), { recursive: true });
    writeFileSync(p, typeof doc === 'string' ? doc : stringify({ apiVersion: 'v1', kind: 'Config', ...doc }));
    return p;
  };
  return { dir, file };
}
const load = (files: string[], context?: string) =>
  loadKubeConfig({ files, origin: `KUBECONFIG=${files.join(':')}` }, context);
const cluster = (name: string, server: string, extra: Record<string, unknown> = {}) => ({
  name,
  cluster: { server, ...extra },
});
const context = (name: string, c: string, user: string) => ({ name, context: { cluster: c, user } });

t.test('several files: the first to define a name wins, and the first to set current-context', async (t) => {
  const { file } = fixture(t);
  const a = file('merge/a', {
    clusters: [cluster('c', 'https://a.example:6443')],
    contexts: [context('x', 'c', 'u')],
  });
  const b = file('merge/b', {
    'current-context': 'x',
    clusters: [cluster('c', 'https://b.example:6443')],
    users: [{ name: 'u', user: { token: 't' } }],
    contexts: [context('x', 'c', 'other')],
  });
  const c = file('merge/c', { 'current-context': 'y' });
  const { kc } = load([a, b, c]);
  t.equal(kc.getCurrentContext(), 'x');
  t.equal(kc.getCurrentCluster()?.server, 'https://a.example:6443');
  t.equal(kc.getCurrentUser()?.name, 'u');
});

t.test(
  'paths relative to the file that names them: CA, client cert and key, tokenFile, exec command',
  async (t) => {
    const { dir, file } = fixture(t);
    writeFileSync(file('rel/pki/ca.crt', ''), 'not a real CA');
    file('rel/token', 'secret-token\n');
    const p = file('rel/config', {
      'current-context': 'x',
      clusters: [cluster('c', 'https://k.example', { 'certificate-authority': 'pki/ca.crt' })],
      users: [
        {
          name: 'u',
          user: { 'client-certificate': 'pki/u.crt', 'client-key': 'pki/u.key', tokenFile: 'token' },
        },
        { name: 'e', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: './bin/p' } } },
        {
          name: 'path',
          user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'kubelogin' } },
        },
      ],
      contexts: [context('x', 'c', 'u'), context('e', 'c', 'e'), context('path', 'c', 'path')],
    });
    const loaded = load([p]);
    t.equal(loaded.kc.getCurrentCluster()?.caFile, join(dir, 'rel/pki/ca.crt'));
    t.equal(loaded.kc.getCurrentUser()?.certFile, join(dir, 'rel/pki/u.crt'));
    t.equal(loaded.kc.getCurrentUser()?.keyFile, join(dir, 'rel/pki/u.key'));
    t.equal(load([p], 'e').kc.getCurrentUser()?.exec.command, join(dir, 'rel/bin/p'));
    // No path separator: found on PATH, as kubectl does.
    t.equal(load([p], 'path').kc.getCurrentUser()?.exec.command, 'kubelogin');
    // The token file is read (and trimmed) per request; the client cert files do not exist, so
    // only the header is checked through a user without them.
    const tokenOnly = file('rel/token-only', {
      'current-context': 'x',
      clusters: [cluster('c', 'https://k.example', { 'certificate-authority': 'pki/ca.crt' })],
      users: [{ name: 'u', user: { tokenFile: 'token' } }],
      contexts: [context('x', 'c', 'u')],
    });
    const auth = kubeConfigAuth(load([tokenOnly]));
    t.equal((await auth.apply()).headers.Authorization, 'Bearer secret-token');
    auth.close();
  },
);

t.test('errors name the field: context, cluster, user, current-context, server, exec', async (t) => {
  const { file } = fixture(t);
  const p = file('bad/config', {
    'current-context': 'x',
    clusters: [cluster('c', 'https://k.example')],
    users: [
      { name: 'u', user: {} },
      {
        name: 'alpha',
        user: { exec: { apiVersion: 'client.authentication.k8s.io/v1alpha1', command: 'p' } },
      },
      { name: 'nocmd', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1' } } },
    ],
    contexts: [
      context('x', 'c', 'u'),
      context('no-cluster', 'gone', 'u'),
      context('no-user', 'c', 'gone'),
      context('alpha', 'c', 'alpha'),
      context('nocmd', 'c', 'nocmd'),
    ],
  });
  t.throws(() => load([p], 'prod'), /context "prod" \(--context\) is not in contexts: x, no-cluster/);
  t.throws(() => load([p], 'no-cluster'), /names cluster "gone", which is not in clusters: c/);
  t.throws(() => load([p], 'no-user'), /names user "gone", which is not in users: u, alpha, nocmd/);
  t.throws(
    () => load([p], 'alpha'),
    /users\["alpha"\]\.exec\.apiVersion "client\.authentication\.k8s\.io\/v1alpha1": accepted values are client\.authentication\.k8s\.io\/v1, client\.authentication\.k8s\.io\/v1beta1/,
  );
  t.throws(() => load([p], 'nocmd'), /users\["nocmd"\]\.exec\.command is missing/);
  const none = file('bad/no-current', { contexts: [context('x', 'c', 'u')] });
  t.throws(() => load([none]), /no current-context; pass --context \(contexts: x\)/);
  const noServer = file('bad/no-server', { clusters: [{ name: 'c', cluster: {} }] });
  t.throws(() => load([noServer]), /bad\/no-server: clusters\[0\]\.cluster\.server is missing/);
});

t.test(
  'KUBECONFIG: missing and empty entries are skipped like kubectl; all missing is an error',
  async (t) => {
    const { dir, file } = fixture(t);
    const empty = file('list/empty', '');
    const real = file('list/real', { 'current-context': 'x', clusters: [cluster('c', 'https://k.example')] });
    const env = { KUBECONFIG: [join(dir, 'list/missing'), empty, '', real].join(':') };
    t.strictSame(kubeconfigFiles({}, env).files, [empty, real]);
    t.throws(() => kubeconfigFiles({}, { KUBECONFIG: join(dir, 'nope') }), /none of these files exists/);
    // --kubeconfig wins over KUBECONFIG.
    t.strictSame(kubeconfigFiles({ kubeconfig: real }, env).files, [real]);
  },
);

t.test('no kubeconfig anywhere: in-cluster, else a message saying what to do', async (t) => {
  const { dir } = fixture(t);
  const home = join(dir, 'home');
  t.throws(() => kubeconfigAuth({ env: { HOME: home } }), /no cluster access: pass --kubeconfig/);
  // Service host set but no service account mounted (not in a pod): the reason is named.
  t.throws(
    () => kubeconfigAuth({ env: { HOME: home, KUBERNETES_SERVICE_HOST: '10.96.0.1' } }),
    /in-cluster access \(KUBERNETES_SERVICE_HOST is set\): ENOENT/,
  );
});

t.test(
  'exec plugin: KUBERNETES_EXEC_INFO given, cluster info on request; concurrent requests run it once',
  async (t) => {
    const { dir, file } = fixture(t);
    const calls = join(dir, 'exec.calls');
    writeFileSync(calls, '');
    const v1 = 'client.authentication.k8s.io/v1';
    const p = file('exec/config', {
      'current-context': 'x',
      clusters: [cluster('c', 'https://k.example:6443', { 'tls-server-name': 'kubernetes' })],
      users: [
        {
          name: 'u',
          user: {
            exec: {
              apiVersion: v1,
              command: PLUGIN,
              args: [v1],
              provideClusterInfo: true,
              env: [
                { name: 'PLUGIN_TOKEN', value: 'tok' },
                { name: 'PLUGIN_CALLS', value: calls },
              ],
            },
          },
        },
      ],
      contexts: [context('x', 'c', 'u')],
    });
    const auth = kubeConfigAuth(load([p]));
    const all = await Promise.all([auth.apply(), auth.apply(), auth.apply()]);
    for (const c of all) t.equal(c.headers.Authorization, 'Bearer tok');
    const lines = readFileSync(calls, 'utf8').trim().split('\n');
    t.equal(lines.length, 1, 'no expiry: one run for every request');
    const info = JSON.parse(lines[0] as string);
    t.strictSame(info, {
      apiVersion: v1,
      kind: 'ExecCredential',
      spec: {
        interactive: false,
        cluster: { server: 'https://k.example:6443', 'tls-server-name': 'kubernetes' },
      },
    });
    auth.close();
  },
);
