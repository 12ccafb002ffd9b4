// List, then watch from the list's resourceVersion, for as long as the signal allows. A watch the server
// closes is resumed from the last resourceVersion seen (bookmarks included), so no event is missed or
// repeated; a resourceVersion the server no longer keeps (410 Gone, as an ERROR event or an HTTP status)
// costs a fresh list, which the caller receives whole so it can settle what it missed.
import { statusOf, type KubeApi, type ObjectList, type WatchEvent } from './client.js';
import type { ChangeType } from './book.js';

export interface InformerOptions<T> {
  readonly api: KubeApi;
  /** The collection's URL path, e.g. `/api/v1/namespaces/agentfense/pods`. */
  readonly path: string;
  /** Selectors for both the list and the watch. */
  readonly query: Record<string, string>;
  readonly list: () => Promise<ObjectList<T>>;
  readonly onList: (items: T[]) => void;
  readonly onChange: (type: ChangeType, object: T) => void;
  /** A failed list or watch; the informer retries after `retryDelayMs`. */
  readonly onError?: (error: unknown) => void;
  readonly signal: AbortSignal;
  readonly retryDelayMs?: number;
}

type WatchEnd = { readonly expired: boolean; readonly error: unknown };

function resourceVersionOf(object: unknown): string | undefined {
  const rv = (object as { metadata?: { resourceVersion?: unknown } } | null)?.metadata?.resourceVersion;
  return typeof rv === 'string' && rv !== '' ? rv : undefined;
}

function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

export async function runInformer<T>(options: InformerOptions<T>): Promise<void> {
  const { signal } = options;
  const retryDelayMs = options.retryDelayMs ?? 1000;
  let resourceVersion: string | undefined;
  while (!signal.aborted) {
    if (resourceVersion === undefined) {
      try {
        const list = await options.list();
        if (signal.aborted) return;
        options.onList(list.items);
        resourceVersion = list.resourceVersion;
      } catch (error) {
        options.onError?.(error);
        await delay(retryDelayMs, signal);
        continue;
      }
    }
    // The list's handler may have stopped the consumer.
    if (signal.aborted) return;
    const end = await watchOnce(options, resourceVersion, (rv) => (resourceVersion = rv));
    if (signal.aborted) return;
    if (end.expired) resourceVersion = undefined;
    else if (end.error !== null) {
      options.onError?.(end.error);
      await delay(retryDelayMs, signal);
    }
  }
}

function watchOnce<T>(
  options: InformerOptions<T>,
  from: string,
  seen: (rv: string) => void,
): Promise<WatchEnd> {
  return new Promise((resolve) => {
    let expired = false;
    let handle: { abort(): void } | undefined;
    let settled = false;
    const finish = (error: unknown): void => {
      if (settled) return;
      settled = true;
      options.signal.removeEventListener('abort', stop);
      resolve({ expired: expired || statusOf(error) === 410, error });
    };
    const stop = (): void => {
      handle?.abort();
      finish(null);
    };
    const onEvent = (event: WatchEvent): void => {
      if (settled) return;
      if (event.type === 'ERROR') {
        // The server ends a watch whose resourceVersion it no longer has with a Status of code 410.
        expired = statusOf(event.object) === 410;
        handle?.abort();
        finish(expired ? null : event.object);
        return;
      }
      const rv = resourceVersionOf(event.object);
      if (rv !== undefined) seen(rv);
      if (event.type === 'ADDED' || event.type === 'MODIFIED' || event.type === 'DELETED') {
        options.onChange(event.type, event.object as T);
      }
    };
    options.signal.addEventListener('abort', stop, { once: true });
    const query = { ...options.query, resourceVersion: from, allowWatchBookmarks: 'true' };
    options.api.watch(options.path, query, onEvent, finish).then(
      (h) => {
        handle = h;
        if (settled) h.abort();
      },
      (error: unknown) => finish(error),
    );
  });
}
