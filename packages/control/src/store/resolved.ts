// SQLite's driver is synchronous; its store classes still answer with promises (the store interface is
// asynchronous for PostgreSQL). The work is done at the call, as before; a throw becomes a rejection.

/** `fn()` as a settled promise: its value, or its throw as the rejection (as an async function does). */
export function resolved<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}
