// Kubeconfigs as operators have them (exec credential plugins, several files in KUBECONFIG,
// certificate paths relative to the file, several contexts) against a real API server, through
// the CLI process a user runs; the cluster's TLS and proxy fields through the client in-process.
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { stringify } from 'yaml';
import { APISERVER_VERSION, type ControlPlane, sharedControlPlane } from '../../../lab/bed/control-plane.ts';
import { START_DEADLINE_MS, sh } from '../../../lab/bed/proc.ts';
import { KubeClient } from '../../../shared/kube/client.ts';
import { kubeconfigAuth } from '../../../shared/kube/kubeconfig.ts';

const CLI = new URL('../../../cli/drainguard.ts', import.meta.url).pathname;
const PLUGIN = new URL('./exec-plugin.sh', import.meta.url).pathname;
const V1 = 'client.authentication.k8s.io/v1';
const V1BETA1 = 'client.authentication.k8s.io/v1beta1';
let cp: ControlPlane;
let dir: string;
let token: string;

// HOME is the test's directory: no ~/.kube/config of the machine's user gets in the way. The
// start-up deadline, not sh's 30 s: at load average 12 (three lanes on two cores) `status` took
// over 30 s to load and run, and how fast it starts is not what these tests measure.
const cli = (args: string[], env: Record<string, string>) =>
  sh([process.execPath, CLI, ...args], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, ...env },
    timeoutMs: START_DEADLINE_MS,
  });

const cluster = (extra: Record<string, unknown> = {}) => ({
  name: 'lab',
  cluster: { server: cp.server, 'certificate-authority': join(cp.dir, 'ca.crt'), ...extra },
});

interface ExecOpts {
  apiVersion?: string;
  token?: string;
  expiry?: string;
  fail?: string;
  firstToken?: string;
}

/** A user whose credentials come from exec-plugin.sh; returns the file counting its calls. */
function execUser(name: string, o: ExecOpts = {}) {
  const calls = join(dir, `${name}.calls`);
  writeFileSync(calls, '');
  const apiVersion = o.apiVersion ?? V1;
  const env = [
    { name: 'PLUGIN_TOKEN', value: o.token ?? token },
    { name: 'PLUGIN_CALLS', value: calls },
    ...(o.expiry ? [{ name: 'PLUGIN_EXPIRY', value: o.expiry }] : []),
    ...(o.fail ? [{ name: 'PLUGIN_FAIL', value: o.fail }] : []),
    ...(o.firstToken ? [{ name: 'PLUGIN_FIRST_TOKEN', value: o.firstToken }] : []),
  ];
  return {
    user: { name, user: { exec: { apiVersion, command: PLUGIN, args: [apiVersion], env } } },
    calls: () =>
      readFileSync(calls, 'utf8')
        .split('\n')
        .filter((l) => l !== ''),
  };
}

function kubeconfig(file: string, doc: Record<string, unknown>): string {
  const p = join(dir, file);
  mkdirSync(join(p, '..'), { recursive: true });
  writeFileSync(p, stringify({ apiVersion: 'v1', kind: 'Config', ...doc }), { mode: 0o600 });
  return p;
}

/** One context, `name`, on the lab cluster as user u: the current one. */
const singleContext = (name: string, u: ReturnType<typeof execUser>) =>
  kubeconfig(`${name}.yaml`, {
    'current-context': name,
    clusters: [cluster()],
    users: [u.user],
    contexts: [{ name, context: { cluster: 'lab', user: u.user.name } }],
  });

t.before(async () => {
  cp = await sharedControlPlane();
  token = cp.target.token as string;
  dir = t.testdir();
});

t.test('status authenticates through an exec plugin (v1): env and args passed, called once', async (t) => {
  const u = execUser('exec-v1', { expiry: new Date(Date.now() + 3_600_000).toISOString() });
  const kc = singleContext('exec', u);
  const r = await cli(['status', '--kubeconfig', kc, '-o', 'json'], {});
  t.equal(r.code, 0, r.stderr);
  t.ok(Array.isArray(JSON.parse(r.stdout).nodes));
  // status makes several requests; the credential is valid for an hour: one plugin run.
  t.equal(u.calls().length, 1);
  const info = JSON.parse(u.calls()[0] as string);
  t.equal(info.kind, 'ExecCredential');
  t.equal(info.apiVersion, V1);
  t.equal(info.spec.interactive, false);
});

t.test('exec plugin (v1beta1) with an expired credential is run again, per request', async (t) => {
  const u = execUser('exec-beta', { apiVersion: V1BETA1, expiry: '2000-01-01T00:00:00Z' });
  const kc = singleContext('beta', u);
  const r = await cli(['status', '-o', 'json'], { KUBECONFIG: kc });
  t.equal(r.code, 0, r.stderr);
  t.ok(u.calls().length > 1, `plugin ran ${u.calls().length} times`);
});

t.test('a token the API server rejects: 401, naming the context and user', async (t) => {
  const u = execUser('exec-wrong', { token: 'not-a-token' });
  const kc = singleContext('wrong', u);
  const r = await cli(['status', '--kubeconfig', kc], {});
  t.equal(r.code, 1);
  t.match(r.stderr, /401/);
  t.match(r.stderr, /context "wrong"/);
  t.match(r.stderr, /user "exec-wrong"/);
});

t.test(
  'a credential refused before its expiry: the plugin is run again once, as client-go does',
  async (t) => {
    const u = execUser('exec-revoked', { firstToken: 'revoked-token' });
    const r = await cli(['status', '--kubeconfig', singleContext('revoked', u), '-o', 'json'], {});
    t.equal(r.code, 0, r.stderr);
    t.equal(u.calls().length, 2);
  },
);

t.test('an exec plugin that fails: its stderr, command and user in the error', async (t) => {
  const u = execUser('exec-fail', { fail: 'please run az login' });
  const kc = singleContext('fail', u);
  const r = await cli(['status', '--kubeconfig', kc], {});
  t.equal(r.code, 1);
  t.match(r.stderr, /users\["exec-fail"\]\.exec/);
  t.match(r.stderr, /exec-plugin\.sh/);
  t.match(r.stderr, /please run az login/);
});

t.test(
  'KUBECONFIG=a:b merges like kubectl: context in a, user in b with certificate paths relative to b',
  async (t) => {
    // b lives in its own directory next to its client certificate (system:masters, signed by the lab CA).
    mkdirSync(join(dir, 'b', 'pki'), { recursive: true });
    copyFileSync(join(cp.dir, 'kubelet-client.crt'), join(dir, 'b', 'pki', 'client.crt'));
    copyFileSync(join(cp.dir, 'kubelet-client.key'), join(dir, 'b', 'pki', 'client.key'));
    copyFileSync(join(cp.dir, 'ca.crt'), join(dir, 'b', 'pki', 'ca.crt'));
    const a = kubeconfig('a/config', {
      'current-context': 'merged',
      contexts: [{ name: 'merged', context: { cluster: 'lab-b', user: 'cert-user' } }],
    });
    const b = kubeconfig('b/config', {
      // a's current-context wins: the first file that sets it.
      'current-context': 'does-not-exist',
      clusters: [{ name: 'lab-b', cluster: { server: cp.server, 'certificate-authority': 'pki/ca.crt' } }],
      users: [
        {
          name: 'cert-user',
          user: { 'client-certificate': 'pki/client.crt', 'client-key': 'pki/client.key' },
        },
      ],
    });
    const r = await cli(['status', '-o', 'json'], { KUBECONFIG: `${a}:${b}` });
    t.equal(r.code, 0, r.stderr);
    t.ok(Array.isArray(JSON.parse(r.stdout).nodes));
  },
);

t.test('--context picks a context that is not current; an unknown one is named in the error', async (t) => {
  const u = execUser('ctx-user');
  const kc = kubeconfig('contexts.yaml', {
    'current-context': 'anonymous',
    clusters: [cluster()],
    users: [u.user, { name: 'nobody', user: {} }],
    contexts: [
      { name: 'anonymous', context: { cluster: 'lab', user: 'nobody' } },
      { name: 'admin', context: { cluster: 'lab', user: 'ctx-user' } },
    ],
  });
  const anon = await cli(['status', '--kubeconfig', kc], {});
  t.equal(anon.code, 1);
  t.match(anon.stderr, /403/);
  const ok = await cli(['status', '--kubeconfig', kc, '--context', 'admin', '-o', 'json'], {});
  t.equal(ok.code, 0, ok.stderr);
  const missing = await cli(['status', '--kubeconfig', kc, '--context', 'prod'], {});
  t.equal(missing.code, 1);
  t.match(missing.stderr, /context "prod" \(--context\) is not in/);
  t.match(missing.stderr, /anonymous, admin/);
});

t.test('a missing kubeconfig file is named', async (t) => {
  const r = await cli(['status', '--kubeconfig', join(dir, 'nope.yaml')], {});
  t.equal(r.code, 1);
  t.match(r.stderr, /--kubeconfig .*nope\.yaml: no such file/);
  const env = await cli(['status'], { KUBECONFIG: `${join(dir, 'x')}:${join(dir, 'y')}` });
  t.equal(env.code, 1);
  t.match(env.stderr, /KUBECONFIG=.*: none of these files exists/);
});

/** GET /version through a kubeconfig whose only cluster has these fields (admin token). */
async function version(name: string, fields: Record<string, unknown>) {
  const kc = kubeconfig(`${name}.yaml`, {
    'current-context': name,
    clusters: [{ name: 'c', cluster: { server: cp.server, ...fields } }],
    users: [{ name: 'admin', user: { token } }],
    contexts: [{ name, context: { cluster: 'c', user: 'admin' } }],
  });
  const client = new KubeClient(kubeconfigAuth({ kubeconfig: kc }));
  try {
    return await client.get<{ gitVersion: string }>('/version', { timeoutMs: 5_000 });
  } finally {
    client.close();
  }
}

t.test(
  'tls-server-name is the name checked in the certificate; insecure-skip-tls-verify skips the check',
  async (t) => {
    const ca = { 'certificate-authority': join(cp.dir, 'ca.crt') };
    // The serving certificate has the SAN "kubernetes", not "elsewhere.example".
    t.equal(
      (await version('sni-ok', { ...ca, 'tls-server-name': 'kubernetes' })).gitVersion,
      `v${APISERVER_VERSION}`,
    );
    await t.rejects(
      version('sni-bad', { ...ca, 'tls-server-name': 'elsewhere.example' }),
      /elsewhere\.example/,
    );
    await t.rejects(version('no-ca', {}), /self.signed|unable to verify|self-signed/i);
    t.equal(
      (await version('insecure', { 'insecure-skip-tls-verify': true })).gitVersion,
      `v${APISERVER_VERSION}`,
    );
  },
);

t.test('proxy-url: requests go through the HTTP CONNECT proxy', async (t) => {
  const tunnels: string[] = [];
  const sockets: { destroy(): void }[] = [];
  const proxy = createServer();
  proxy.on('connect', (req, socket, head) => {
    tunnels.push(req.url ?? '');
    const [host, port] = (req.url ?? '').split(':') as [string, string];
    const upstream = connect(Number(port), host, () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(socket).pipe(upstream);
    });
    upstream.on('error', () => socket.destroy());
    socket.on('error', () => upstream.destroy());
    sockets.push(socket, upstream);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  try {
    const { port } = proxy.address() as { port: number };
    const v = await version('proxied', {
      'certificate-authority': join(cp.dir, 'ca.crt'),
      'proxy-url': `http://127.0.0.1:${port}`,
    });
    t.equal(v.gitVersion, `v${APISERVER_VERSION}`);
    t.strictSame(tunnels, [new URL(cp.server).host]);
  } finally {
    // Tunnels are no longer the server's connections: close() would wait for them.
    for (const x of sockets) x.destroy();
    await new Promise((r) => proxy.close(r));
  }
});
