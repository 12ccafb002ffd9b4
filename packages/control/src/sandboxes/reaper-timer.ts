// The control plane's periodic reaper: expired sandboxes and failed destroys are removed every interval.
// With a shared database (API replicas, docs/scale-out.md) each tick first recovers the sandboxes of a
// replica that died: they become STOPPED within one interval instead of at the next open or start.
import type { Logger } from 'pino';
import type { SandboxManager } from './manager.js';

export function startReaper(o: {
  readonly sandboxes: Pick<SandboxManager, 'reap' | 'recover'>;
  readonly logger: Logger;
  readonly intervalMs: number;
  readonly recover: boolean;
}): NodeJS.Timeout | undefined {
  if (o.intervalMs <= 0) return undefined;
  const timer = setInterval(() => {
    void (async () => {
      if (o.recover) await o.sandboxes.recover();
      await o.sandboxes.reap();
    })().catch((err: unknown) => o.logger.error({ err }, 'reaper failed'));
  }, o.intervalMs);
  timer.unref();
  return timer;
}
