// Starting a long-lived process (a session's shell) across a worker restart. exec waits for a restart in
// progress; a shell started meanwhile would find the dead mount (bwrap: "Can't chdir to /workspace"), or
// begin just before the death was noticed. Such a start is made once more on the new worker: nothing of
// the caller's has run in it yet.

/** Runs `start` once the worker is ready; again once if it failed while the worker was being replaced. */
export async function whenWorkerReady<T>(
  supervisor: { worker(): Promise<unknown> },
  start: () => Promise<T>,
): Promise<T> {
  const worker = await supervisor.worker();
  try {
    return await start();
  } catch (err) {
    const now = await supervisor.worker().catch(() => worker);
    if (now === worker) throw err;
    return start();
  }
}
