// `drainguard reset`: undo what drainguard left behind after its sidecar was removed — the
// exclude label only where drainguard's own annotation says it added it, drainguard's Node
// annotations, and (with --local, on the node) the `drainguard` nft tables. Dry run unless --yes.
import { isApiError } from '../shared/kube/api-error.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { kubeconfigUsage } from '../shared/kube/kubeconfig-usage.ts';
import type { KubeList, Node, Pod } from '../shared/kube/types.ts';
import { createLogger } from '../shared/log.ts';
import {
  ANNOTATION_PREFIX,
  API_FENCE_TABLE,
  EXCLUDE_LABEL,
  FENCE_TABLE,
  LABEL_OWNED_ANNOTATION,
} from '../shared/names.ts';
import {
  apiFenceTableIn,
  fenceTablesIn,
  renderApiUnfence,
  renderUnfence,
} from '../shared/net/fence-tables.ts';
import { ToolError, ToolRunner } from '../sidecar/runner.ts';
import { CommandLine, KUBECONFIG_OPTIONS } from './command-line.ts';
import { injectedStatus } from './status.ts';

export const USAGE = `Usage: drainguard reset (--node NAME | --all) [--yes] [--local] [--kubeconfig PATH] [--context NAME] [--netns NAME]

Undoes what drainguard left behind once its sidecar is gone:
  - the ${EXCLUDE_LABEL} label, only where the
    ${LABEL_OWNED_ANNOTATION}=true annotation says drainguard added it
    (a label someone else set, e.g. kubeadm on control-plane nodes, is kept);
  - every ${ANNOTATION_PREFIX}* annotation on the Node;
  - with --local (run on the node itself, root): the nft tables "netdev ${FENCE_TABLE}" and
    "inet ${FENCE_TABLE}" (the L2 fence) and "inet ${API_FENCE_TABLE}" (a stale API server's fence).
Prints the plan; changes nothing without --yes.

  --node NAME        the node to reset (with --local: this node; default $DRAINGUARD_NODE_NAME)
  --all              every node (not with --local)
  --yes              act; without it this is a dry run
  --local            also remove the nft tables on this machine
${kubeconfigUsage(18)}
  --netns NAME       run nft inside network namespace NAME (testing, debugging)

Exit: 0 done (or nothing to do), 1 an API/tool error, 2 bad usage.
`;

export interface NodePlan {
  node: string;
  resourceVersion: string;
  removeLabel: boolean;
  /** Why the label stays although present (not drainguard's). */
  keptLabel: string | null;
  removeAnnotations: string[];
  /** Injected pods still on the node: their sidecar would redo what reset undoes. */
  liveSidecars: string[];
}

export function planNode(node: Node, pods: Pod[]): NodePlan {
  const name = node.metadata?.name ?? '';
  const ann = node.metadata?.annotations ?? {};
  const labelled = node.metadata?.labels?.[EXCLUDE_LABEL] !== undefined;
  const ours = ann[LABEL_OWNED_ANNOTATION] === 'true';
  return {
    node: name,
    resourceVersion: node.metadata?.resourceVersion ?? '',
    removeLabel: labelled && ours,
    keptLabel: labelled && !ours ? `${LABEL_OWNED_ANNOTATION} is not "true": not added by drainguard` : null,
    removeAnnotations: Object.keys(ann)
      .filter((k) => k.startsWith(ANNOTATION_PREFIX))
      .sort(),
    liveSidecars: pods
      .filter(
        (p) => p.spec?.nodeName === name && !p.metadata?.deletionTimestamp && injectedStatus(p) !== undefined,
      )
      .map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`)
      .sort(),
  };
}

/** The merge patch for a plan; resourceVersion makes it fail (409) if the Node changed since it was read. */
export function nodePatch(plan: NodePlan): Record<string, unknown> | undefined {
  if (!plan.removeLabel && plan.removeAnnotations.length === 0) return undefined;
  const metadata: Record<string, unknown> = { resourceVersion: plan.resourceVersion };
  if (plan.removeLabel) metadata.labels = { [EXCLUDE_LABEL]: null };
  if (plan.removeAnnotations.length > 0)
    metadata.annotations = Object.fromEntries(plan.removeAnnotations.map((k) => [k, null]));
  return { metadata };
}

export function describePlan(plan: NodePlan, act: boolean): string[] {
  const verb = act ? 'removed' : 'would remove';
  const out: string[] = [];
  if (plan.removeLabel) out.push(`node/${plan.node}: ${verb} label ${EXCLUDE_LABEL} (added by drainguard)`);
  if (plan.keptLabel) out.push(`node/${plan.node}: keeping label ${EXCLUDE_LABEL}: ${plan.keptLabel}`);
  for (const a of plan.removeAnnotations) out.push(`node/${plan.node}: ${verb} annotation ${a}`);
  if (out.length === 0) out.push(`node/${plan.node}: nothing of drainguard's on the Node`);
  if (plan.liveSidecars.length > 0)
    out.push(
      `node/${plan.node}: warning: injected pods still run here (${plan.liveSidecars.join(', ')}); their sidecar may redo this — remove them or their injection first`,
    );
  return out;
}

interface Opts {
  node?: string;
  all?: boolean;
  yes?: boolean;
  local?: boolean;
  kubeconfig?: string;
  context?: string;
  netns?: string;
  help?: boolean;
}

async function resetNode(
  client: KubeClient,
  name: string,
  pods: Pod[],
  act: boolean,
  say: (l: string) => void,
) {
  for (let attempt = 0; ; attempt++) {
    const node = await client.get<Node>(`/api/v1/nodes/${encodeURIComponent(name)}`);
    const plan = planNode(node, pods);
    const patch = nodePatch(plan);
    if (act && patch)
      try {
        await client.patch(`/api/v1/nodes/${encodeURIComponent(name)}`, patch, 'merge');
      } catch (e) {
        // The Node changed between read and write (e.g. a sidecar wrote its status): plan again.
        if (isApiError(e, 409) && attempt < 5) continue;
        throw e;
      }
    for (const l of describePlan(plan, act)) say(l);
    return;
  }
}

async function resetLocal(runner: ToolRunner, act: boolean, say: (l: string) => void) {
  const tables = (await runner.run('nft', ['-j', 'list', 'tables'])).stdout;
  const present = fenceTablesIn(tables);
  const apiFence = apiFenceTableIn(tables);
  if (present.length === 0 && !apiFence) {
    say(`local: no ${FENCE_TABLE} nft table`);
    return;
  }
  // One transaction for both families, the same one the sidecar uses to lift its fence.
  if (act && present.length > 0)
    await runner.run('nft', ['-f', '-'], { input: renderUnfence(), mutates: true });
  for (const f of present) say(`local: ${act ? 'removed' : 'would remove'} nft table ${f} ${FENCE_TABLE}`);
  if (!apiFence) return;
  if (act) await runner.run('nft', ['-f', '-'], { input: renderApiUnfence(), mutates: true });
  say(`local: ${act ? 'removed' : 'would remove'} nft table inet ${API_FENCE_TABLE}`);
}

export async function run(argv: string[], say: (l: string) => void = (l) => process.stdout.write(`${l}\n`)) {
  const cli = new CommandLine('reset', USAGE);
  const parsed = cli.parse(argv, {
    node: { type: 'string' },
    all: { type: 'boolean' },
    yes: { type: 'boolean' },
    local: { type: 'boolean' },
    ...KUBECONFIG_OPTIONS,
    netns: { type: 'string' },
  });
  if (typeof parsed === 'number') return parsed;
  const values: Opts = parsed.values;
  const node = values.node ?? (values.local ? process.env.DRAINGUARD_NODE_NAME : undefined);
  if (values.all && values.node) return cli.wrong('--node and --all exclude each other');
  if (values.all && values.local)
    return cli.wrong('--local acts on this machine only: use --node NAME, not --all');
  if (!values.all && !node) return cli.wrong('name the node with --node NAME, or use --all');
  if (values.netns && !values.local) return cli.wrong('--netns only makes sense with --local');
  const act = values.yes === true;
  if (!act) say('dry run: nothing is changed (add --yes to act)');
  const client = await cli.connect(values);
  if (typeof client === 'number') return client;
  try {
    const pods = (await client.get<KubeList<Pod>>('/api/v1/pods')).items ?? [];
    const names = values.all
      ? ((await client.get<KubeList<Node>>('/api/v1/nodes')).items ?? []).map((n) => n.metadata?.name ?? '')
      : [node as string];
    for (const n of names) await resetNode(client, n, pods, act, say);
    if (values.local) {
      const runner = new ToolRunner({
        log: createLogger('reset', 'warn'),
        ...(values.netns ? { prefix: ['ip', 'netns', 'exec', values.netns] } : {}),
      });
      await resetLocal(runner, act, say);
    }
    return 0;
  } catch (e) {
    return cli.fail(e instanceof ToolError || e instanceof Error ? e.message : String(e));
  } finally {
    client.close();
  }
}
