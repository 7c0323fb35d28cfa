// `drainguard netfilter-cleanup --once`: one confirmed cleanup for operators.
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { systemClock } from '../shared/clock.ts';
import { isApiError } from '../shared/kube/api-error.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { kubeconfigUsage } from '../shared/kube/kubeconfig-usage.ts';
import type { KubeList, Node, Pod } from '../shared/kube/types.ts';
import { createLogger } from '../shared/log.ts';
import { Cleaner, type PassInput, type PassResult } from '../sidecar/netfilter/cleaner.ts';
import { nodeAddresses, parsePodList, podInfos, podsAwaitingIp } from '../sidecar/netfilter/pods.ts';
import { ToolError, ToolRunner } from '../sidecar/runner.ts';
import { CommandLine, KUBECONFIG_OPTIONS } from './command-line.ts';

export const USAGE = `Usage: drainguard netfilter-cleanup --once [--dry-run] [--pods-file PODLIST.json] [--node NAME]
                                   [--kubeconfig PATH] [--context NAME] [--confirm-seconds N] [--netns NAME]

Removes stale per-pod ebtables nat PREROUTING arpreply/dnat rules and neighbour entries left
by a previous CNI (azure-vnet) on this node: lists, waits the confirmation interval, lists
again, and acts only on what was stale both times. Prints one line per item and why.

  --once               required: run one confirmed cleanup and exit (the sidecar runs it continuously)
  --dry-run            report what would be removed; change nothing
  --pods-file FILE     pods from a PodList (kubectl get pods -o json); no API access needed
  --node NAME          this node's name (default $DRAINGUARD_NODE_NAME, else the hostname)
${kubeconfigUsage(20)}
  --confirm-seconds N  time between the two listings (default 2)
  --netns NAME         run the tools inside network namespace NAME (testing, debugging)

Exit: 0 done (or nothing stale), 1 a tool/permission/API/deletion error, 2 bad usage.
`;

function lines(r: PassResult): string[] {
  const verb = r.dryRun ? 'would remove' : 'removed';
  return [
    ...r.removedRules.map(
      (x) => `${verb} ebtables -t ${x.rule.table} ${x.rule.chain} ${x.rule.spec}  # ${x.reason}`,
    ),
    ...r.removedNeighbours.map(
      (n) => `${verb} neighbour ${n.neighbour.ip} dev ${n.neighbour.dev}  # ${n.reason}`,
    ),
  ];
}

export async function run(argv: string[]): Promise<number> {
  // A blank line between a mistake and the usage.
  const cli = new CommandLine('netfilter-cleanup', USAGE, `\n${USAGE}`);
  const parsed = cli.parse(argv, {
    once: { type: 'boolean' },
    'dry-run': { type: 'boolean' },
    'pods-file': { type: 'string' },
    node: { type: 'string' },
    ...KUBECONFIG_OPTIONS,
    'confirm-seconds': { type: 'string' },
    netns: { type: 'string' },
  });
  if (typeof parsed === 'number') return parsed;
  const { values } = parsed;
  if (!values.once)
    return cli.wrong(
      '--once is required (continuous cleanup runs in the sidecar, feature netfilter-cleanup)',
    );
  const confirmSeconds = Number(values['confirm-seconds'] ?? '2');
  if (!Number.isFinite(confirmSeconds) || confirmSeconds < 0 || confirmSeconds > 3600)
    return cli.badValue(
      `--confirm-seconds must be a number from 0 to 3600, got "${values['confirm-seconds']}"`,
    );
  const out = (s: string) => process.stdout.write(`${s}\n`);
  const log = createLogger(
    'drainguard-netfilter-cleanup',
    process.env.DRAINGUARD_LOG_LEVEL ?? 'warn',
    process.stderr,
  );
  const nodeName = values.node ?? process.env.DRAINGUARD_NODE_NAME ?? hostname();

  // Pods (and the Node's addresses) from a file or from the API, read once.
  let pods: Pod[];
  let node: Node | undefined;
  let client: KubeClient | undefined;
  if (values['pods-file']) {
    const file = values['pods-file'];
    try {
      pods = parsePodList(await readFile(file, 'utf8'), file);
    } catch (e) {
      return cli.fail(`--pods-file: ${(e as Error).message}`);
    }
  } else {
    const connected = await cli.connect(
      values,
      { userAgent: 'drainguard-netfilter-cleanup' },
      ' (or pass --pods-file to run without API access)',
    );
    if (typeof connected === 'number') return connected;
    client = connected;
    try {
      const list = await client.get<KubeList<Pod>>('/api/v1/pods', {
        query: { fieldSelector: `spec.nodeName=${nodeName}` },
        retries: 2,
      });
      pods = list.items ?? [];
      node = await client.get<Node>(`/api/v1/nodes/${encodeURIComponent(nodeName)}`, { retries: 2 });
    } catch (e) {
      const why = isApiError(e, 403)
        ? ' (needs RBAC: pods list, nodes get)'
        : isApiError(e, 404)
          ? ` (no Node named "${nodeName}"; pass --node)`
          : '';
      client.close();
      return cli.fail(`reading pods/node from the API failed: ${(e as Error).message}${why}`);
    }
  }
  const api = client;
  const input: PassInput = {
    // Only this node's pods: a neighbour is judged only for IPs of pods here.
    pods: podInfos(pods, nodeName),
    nodeAddresses: nodeAddresses(node),
    // From the API: read the pods again right before deleting; while a pod of this node has no
    // IP in the API yet (its CNI may have wired rules already) nothing is deleted.
    ...(api
      ? {
          recheck: async () => {
            const again =
              (
                await api.get<KubeList<Pod>>('/api/v1/pods', {
                  query: { fieldSelector: `spec.nodeName=${nodeName}` },
                  retries: 2,
                })
              ).items ?? [];
            const awaiting = podsAwaitingIp(again, nodeName);
            return {
              pods: podInfos(again, nodeName),
              ...(awaiting.length ? { holdFrom: Number.NEGATIVE_INFINITY } : {}),
            };
          },
        }
      : {}),
  };
  try {
    const runner = new ToolRunner({
      log,
      historyLimit: 50,
      ...(values.netns ? { prefix: ['ip', 'netns', 'exec', values.netns] } : {}),
    });
    const cleaner = new Cleaner({
      runner,
      log,
      clock: systemClock,
      confirmMs: confirmSeconds * 1000,
      dryRun: values['dry-run'] ?? false,
    });
    if (values['pods-file'] && pods.length > 0 && input.pods.length === 0)
      process.stderr.write(
        `drainguard netfilter-cleanup: note: no pod in ${values['pods-file']} has spec.nodeName "${nodeName}" (pass --node)\n`,
      );
    const ebtables = await cleaner.detectEbtables();
    if (!ebtables.usable) return cli.fail(`${ebtables.error}`);
    try {
      const first = await cleaner.pass(input);
      const seen = first.staleRules.length + first.staleNeighbours.length;
      if (seen === 0) {
        out(`nothing stale on ${nodeName} (${input.pods.length} pods checked)`);
        return 0;
      }
      // The confirmation interval: only what is still stale after it is acted on.
      await systemClock.sleep(confirmSeconds * 1000);
      const second = await cleaner.pass(input);
      for (const l of lines(second)) out(l);
      const acted = second.removedRules.length + second.removedNeighbours.length;
      if (acted < seen)
        out(`${seen - acted} item(s) stale on the first listing were gone or live on the second: left alone`);
      if (second.heldForNewPods)
        out(
          `${second.heldForNewPods} item(s) kept: a pod of ${nodeName} has no IP in the API yet and may own them; run again once it has one`,
        );
      if (second.held) process.stderr.write(`drainguard netfilter-cleanup: ${second.held}\n`);
      for (const err of second.errors) process.stderr.write(`drainguard netfilter-cleanup: ${err}\n`);
      return second.errors.length || second.held ? 1 : 0;
    } catch (e) {
      if (e instanceof ToolError)
        return cli.fail(`${e.message}${e.exitCode === null ? '' : ' (are you root with NET_ADMIN?)'}`);
      return cli.fail((e as Error).message);
    }
  } finally {
    api?.close();
  }
}
