// Foreground commands (mount, serve, logs -f) end on the first SIGINT or SIGTERM and then clean up.

/** Resolves with the signal's name on the first SIGINT or SIGTERM; dispose() removes the listeners. */
export function untilSignal(): { promise: Promise<string>; dispose(): void } {
  let onSignal: (signal: string) => void = () => undefined;
  const promise = new Promise<string>((done) => (onSignal = done));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return {
    promise,
    dispose: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}
