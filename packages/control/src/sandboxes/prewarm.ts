// Getting ready for a start that is about to come (the one-shot CLI, the library's first call on a data
// directory): a worker spawns and the runtime checks the host, and gets ready for sandboxes of that kind
// (docker's container pool), in the background while the caller recovers, links and creates.
import type { Logger } from 'pino';
import type { ResourceLimits } from '@agentfense/protocol';
import type { RuntimeRegistry } from './runtimes.js';
import type { WorkerPool } from '@agentfense/fuse-worker';

/** What prewarm() gets ready for: a runtime name, or a runtime with the image and limits to come. */
export type PrewarmKind =
  string | { readonly runtime: string; readonly image?: string; readonly resources?: ResourceLimits };

/** Starts the work in the background; failures surface in the start itself (logged here at debug). */
export function prewarm(
  deps: {
    readonly pool: WorkerPool;
    readonly runtimes: RuntimeRegistry;
    /** Limits of sandboxes that do not set them (the kind's limits are merged over them). */
    readonly defaultResources: ResourceLimits;
    readonly logger: Logger;
  },
  kind: PrewarmKind,
): void {
  const { runtime, image, resources } = typeof kind === 'string' ? { runtime: kind } : kind;
  deps.pool.prewarm();
  void deps.runtimes
    .get(runtime)
    .then(async (r) => {
      // What the runtime keeps ahead is made for sandboxes like the one coming (docker's pool).
      r.prepare?.({
        ...(image === undefined ? {} : { image }),
        resources: { ...deps.defaultResources, ...resources },
      });
      await r.check();
    })
    .catch((err: unknown) => deps.logger.debug({ err, runtime }, 'runtime check ahead failed'));
}
