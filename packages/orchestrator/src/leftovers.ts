// A node that comes back after its sandboxes were placed elsewhere must not keep their views mounted.
// Its node agent asks the orchestrator where each sandbox it still holds runs now; every one not running
// on this node is a leftover to unmount and forget. It works for any adapter, since it only uses locate.
import { OrchestratorError } from './errors.js';
import type { Orchestrator } from './types.js';

/** The sandbox ids among `held` that the orchestrator does not run on `nodeName` now. */
export async function findLeftovers(
  orchestrator: Pick<Orchestrator, 'locate'>,
  nodeName: string,
  held: readonly string[],
): Promise<string[]> {
  const leftovers: string[] = [];
  for (const sandboxId of held) {
    let here: boolean;
    try {
      here = (await orchestrator.locate(sandboxId))?.nodeName === nodeName;
    } catch (error) {
      // Placed here while this node's own agent is not ready yet: the sandbox belongs here.
      if (!(error instanceof OrchestratorError) || error.reason !== 'no-node-agent') throw error;
      here = error.details?.['nodeName'] === nodeName;
    }
    if (!here) leftovers.push(sandboxId);
  }
  return leftovers;
}
