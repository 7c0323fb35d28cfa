// The chart's node guard (a ValidatingAdmissionPolicy, GA in 1.30) enforced by the real API server
// on the credentials that matter: a speaker pod's bound service-account token, whose node-name
// claim the kubelet's token request puts there. RBAC lets the speaker's account patch any Node
// (checked first, as a dry run without the policy); with the chart's policy, the same token may
// set the exclude label on its own Node only, and may not touch the spec or another Node.
import t from 'tap';
import YAML from 'yaml';
import type { Cluster } from '../../../lab/cluster/cluster.ts';
import { IDLE_ARGS } from '../../../lab/cluster/manifests.ts';
import { waitFor } from '../../../shared/clock.ts';
import { ApiError } from '../../../shared/kube/api-error.ts';
import { KubeClient } from '../../../shared/kube/client.ts';
import { EXCLUDE_LABEL } from '../../../shared/names.ts';
import { CHART, parseDocs, run, tool } from '../../unit/helm/render.ts';
import { withLogs } from './logs.ts';
import { cluster, installed } from './shared.ts';

const NS = 'metallb-system';
const POD = 'node-guard-probe';
const T = { timeoutMs: 120_000, intervalMs: 250 };

let c: Cluster;

/** The chart's policy and binding, as `helm template --set nodeGuard.enabled=true` renders them. */
function chartPolicy(): object[] {
  const r = run(tool('helm4'), ['template', 'drainguard', CHART, '--set', 'nodeGuard.enabled=true']);
  if (r.code !== 0) throw new Error(r.stderr);
  return parseDocs(r.stdout).filter((d) => d.kind.startsWith('ValidatingAdmissionPolicy'));
}

/** A merge patch of a Node as the token's owner; the API's answer as a code and message. */
async function patchNode(
  client: KubeClient,
  node: string,
  body: object,
  dryRun: boolean,
): Promise<{ code: number; message: string }> {
  try {
    await client.request(`/api/v1/nodes/${node}`, {
      method: 'PATCH',
      body,
      contentType: 'application/merge-patch+json',
      ...(dryRun ? { query: { dryRun: 'All' } } : {}),
    });
    return { code: 200, message: '' };
  } catch (e) {
    if (e instanceof ApiError) return { code: e.code, message: e.detail };
    throw e;
  }
}

t.test("the chart's node guard, enforced by the API server on a speaker pod's token", async (t) => {
  c = await cluster();
  await installed(c);
  const [own, other] = ['node-b', 'node-c'];
  t.teardown(async () => {
    await c.kubectl(['delete', 'pod', '-n', NS, POD, '--wait=false']);
    await c.kubectl(['delete', '-f', '-'], {
      input: chartPolicy()
        .map((d) => YAML.stringify(d))
        .join('---\n'),
    });
    await c.kubectl(['label', 'node', own, `${EXCLUDE_LABEL}-`]);
  });
  await withLogs(c, async () => {
    await c.k(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: POD, namespace: NS },
        spec: {
          serviceAccountName: 'speaker',
          nodeName: own,
          terminationGracePeriodSeconds: 1,
          containers: [
            { name: 'probe', image: 'drainguard-lab:dev', imagePullPolicy: 'Never', args: IDLE_ARGS },
          ],
        },
      }),
    });
    await c.k(['wait', '-n', NS, `pod/${POD}`, '--for=condition=Ready', '--timeout=120s']);
    const token = (
      await c.k(['exec', '-n', NS, POD, '--', 'cat', '/var/run/secrets/kubernetes.io/serviceaccount/token'])
    ).trim();
    const claims = JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString()) as {
      'kubernetes.io'?: { node?: { name?: string } };
    };
    t.equal(claims['kubernetes.io']?.node?.name, own, "the kubelet's token names the pod's node");
    const speaker = new KubeClient({ ...c.cp.target, token });
    t.teardown(() => speaker.close());
    const specChange = { spec: { unschedulable: true } };

    // Without the policy RBAC alone decides: it lets the account change a Node's spec.
    t.equal((await patchNode(speaker, own, specChange, true)).code, 200, 'RBAC allows a spec change');

    await c.k(['apply', '-f', '-'], {
      input: chartPolicy()
        .map((d) => YAML.stringify(d))
        .join('---\n'),
    });
    // The policy takes effect once the API server has loaded it: wait for the first refusal.
    const refused = await waitFor(
      'the policy refuses a spec change',
      async () => {
        const r = await patchNode(speaker, own, specChange, true);
        return r.code === 200 ? undefined : r;
      },
      T,
    );
    t.equal(refused.code, 403, refused.message);
    t.match(refused.message, /may not change a Node's spec/);

    const label = { metadata: { labels: { [EXCLUDE_LABEL]: 'true' } } };
    const elsewhere = await patchNode(speaker, other, label, false);
    t.equal(elsewhere.code, 403, `another Node refused: ${elsewhere.message}`);
    t.match(elsewhere.message, /may write only the Node its pod runs on/);

    const labelled = await patchNode(speaker, own, label, false);
    t.equal(labelled.code, 200, `the exclude label on its own Node is allowed: ${labelled.message}`);
    const node = JSON.parse(await c.k(['get', 'node', own, '-o', 'json'])) as {
      metadata: { labels?: Record<string, string> };
    };
    t.equal(node.metadata.labels?.[EXCLUDE_LABEL], 'true');
  });
});
