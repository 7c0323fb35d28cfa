// After a start: the handover's memory read back from the own Node (its status annotation and
// exclude label) and the nft fence, so a restart resumes where the last sidecar was.
import { readL2State } from '../../shared/l2-state.ts';
import { EXCLUDE_LABEL, L2_STATE_ANNOTATION, LABEL_OWNED_ANNOTATION } from '../../shared/names.ts';
import type { FeatureContext } from '../feature.ts';
import type { FenceSpec } from './fence.ts';
import { L2_EVENT_REASONS, type L2Memory, SPEAKER_CATCH_UP_MAX_MS } from './handover/index.ts';
import { resume } from './handover/resume.ts';
import type { OwnNode } from './own-node.ts';
import type { HeldEvents } from './reporting.ts';

/** The memory to resume with; a malformed annotation is ignored, with a warning and an Event. */
export async function readBack(
  ctx: FeatureContext,
  own: OwnNode,
  events: HeldEvents,
  fence: () => FenceSpec | undefined,
): Promise<L2Memory> {
  const node = await own.read().catch((e: unknown) => {
    ctx.log.warn({ err: (e as Error).message }, 'cannot read the own Node; resuming from nft only');
    return undefined;
  });
  const read = readL2State(node?.metadata?.annotations?.[L2_STATE_ANNOTATION]);
  if (read.problem) {
    ctx.log.warn(
      { annotation: L2_STATE_ANNOTATION, problem: read.problem },
      'malformed status annotation ignored',
    );
    events.record(
      'Warning',
      L2_EVENT_REASONS.stateInvalid,
      `annotation ${L2_STATE_ANNOTATION} on node ${ctx.config.nodeName} is malformed (${read.problem}): ignored; the L2 handover resumes from the nft fence alone and writes a new one`,
    );
  }
  const labels = node?.metadata?.labels;
  const ownLabel = node
    ? labels?.[EXCLUDE_LABEL] !== undefined && node.metadata?.annotations?.[LABEL_OWNED_ANNOTATION] === 'true'
    : undefined;
  const memory = resume(read.state, fence(), ctx.clock.now(), ownLabel);
  if (memory.apiOutage)
    ctx.log.info(
      {
        ownLabel: ownLabel ?? 'unknown (own Node unreadable)',
        memberlistCut: (fence()?.memberlistPorts.length ?? 0) > 0,
      },
      `resumed with drainguard's exclude label on the Node, or its fail-safe's memberlist cut: an API outage before this start cannot be ruled out, so a drain that ends within ${SPEAKER_CATCH_UP_MAX_MS / 1000} s of it (or of the API answering again) keeps the label until then, while this node's speaker catches up`,
    );
  return memory;
}
