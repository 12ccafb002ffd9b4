// Foreground commands (mount, serve, logs -f) end on the first SIGINT or SIGTERM and then clean up.

/**
 * Resolves with the signal's name on the first SIGINT or SIGTERM; dispose() removes the listeners.
 *
 * The listeners stay installed until dispose(), and later signals are ignored: execa's exit handler
 * (signal-exit, loaded by the first sandboxed command) re-raises a signal when it finds no other listener
 * for it, so `once` listeners would let that handler kill the process in the middle of its cleanup
 * (mounts left behind, status 130).
 */
export function untilSignal(): { promise: Promise<string>; dispose(): void } {
  let first: ((signal: string) => void) | undefined;
  const promise = new Promise<string>((done) => (first = done));
  const onSignal = (signal: string): void => {
    first?.(signal);
    first = undefined;
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    promise,
    dispose: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}
