// The command line of a worker spawned ahead of time, shared by the pool and control's one-shot CLI (which
// starts its worker before it loads the pool; spawnWorker adopts such a worker only when the command
// lines match, so a difference here would silently cost a second spawn).

/** The name pooled workers get (process title, log lines) until their mount names their sandbox. */
export const POOL_WORKER_NAME = 'pool';
