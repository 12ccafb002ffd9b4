// Answers in parts (changes, diff, commit of 100k+ entries): the first part names a cursor, the rest is
// fetched with `more` from the same worker (cursors live in one worker process).
import { collectParts } from '@agentfense/protocol';
import type { WorkerClient, WorkerMethod, WorkerParams, WorkerResult } from '@agentfense/protocol';

/** A worker request function (a live supervisor's or a temporary worker client's). */
type WorkerRequest = <N extends WorkerMethod>(method: N, params: WorkerParams<N>) => Promise<WorkerResult<N>>;

/** Calls a worker method and, for answers in parts (changes, diff, commit), fetches the rest. */
async function requestWhole<M extends WorkerMethod>(
  request: WorkerRequest,
  method: M,
  params: WorkerParams<M>,
): Promise<WorkerResult<M>> {
  const first = await request(method, params);
  if (typeof first !== 'object' || first === null || !('next' in first)) return first;
  return collectParts(first, (cursor) => request('more', { cursor }));
}

/** requestWhole on one worker: every part from the worker that gave the first (cursors are per worker). */
export function requestWholeOn<M extends WorkerMethod>(
  client: Pick<WorkerClient, 'request'>,
  method: M,
  params: WorkerParams<M>,
): Promise<WorkerResult<M>> {
  return requestWhole((m, p) => client.request(m, p), method, params);
}
