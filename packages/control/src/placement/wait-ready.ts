// Waiting for one sandbox's placement: the orchestrator's watch, until `ready` (its node), a `lost` the
// orchestrator will not replace, or the timeout.
import type { Orchestrator } from '@agentfense/orchestrator';
import { RemoteSandboxError } from './errors.js';

export async function waitReady(
  orchestrator: Orchestrator,
  sandboxId: string,
  timeoutMs: number,
): Promise<{ nodeName: string }> {
  const stop = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    stop.abort();
  }, timeoutMs);
  let last = 'no placement reported';
  try {
    for await (const status of orchestrator.watch({ signal: stop.signal })) {
      if (status.sandboxId !== sandboxId) continue;
      if (status.state === 'ready') return { nodeName: status.nodeName };
      if (status.state === 'pending') last = `pending: ${status.detail}`;
      if (status.state === 'gone') last = 'removed';
      if (status.state === 'lost') {
        last = `lost (${status.reason}): ${status.detail}`;
        if (!status.replaced) break;
      }
    }
  } catch (err) {
    if (!timedOut) throw err;
  } finally {
    clearTimeout(timer);
    stop.abort();
  }
  throw new RemoteSandboxError(
    'placement-failed',
    `sandbox ${sandboxId} was not placed${timedOut ? ` within ${timeoutMs} ms` : ''} (${last})`,
    { details: { id: sandboxId } },
  );
}
