// The PostgreSQL connection of the metadata store: a pool (the `pg` package) whose 64-bit integers come
// back as numbers (times in ms and byte counts stay far below 2^53), and failures told apart by a closed
// set of reasons (url.ts). The password is never part of a message or a log line.
import pg from 'pg';
import { InvalidArgumentError, UnavailableError } from '@agentfense/protocol';
import type { AgentFenseError } from '@agentfense/protocol';
import { redactUrl } from './url.js';
import type { PostgresFailure } from './url.js';

/** Connections one control plane keeps at most (an exec touches a few records; starts a few more). */
const POOL_MAX = 10;
/** How long opening a connection may take before the server counts as unreachable (ms). */
const CONNECT_TIMEOUT_MS = 10_000;

/** A pool over the URL (not connected yet: the first query connects). */
export function createPool(url: string): pg.Pool {
  const asNumber = (value: string): number => Number(value);
  const pool = new pg.Pool({
    connectionString: url,
    max: POOL_MAX,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary'): unknown =>
        oid === (pg.types.builtins.INT8 as number)
          ? asNumber
          : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
    },
  });
  // An idle connection the server closed is dropped by the pool; the next query opens another (or
  // fails with its own error). Without a listener the event would end the process.
  pool.on('error', () => undefined);
  return pool;
}

/** The error to throw for a failure to reach or use the server at `url` (errors of ours pass as they are). */
export function connectionError(err: unknown, url: string): AgentFenseError {
  if (err instanceof InvalidArgumentError || err instanceof UnavailableError) return err;
  const code = (err as { code?: unknown }).code;
  const reason: PostgresFailure =
    code === '28P01' || code === '28000'
      ? 'authentication'
      : code === '3D000'
        ? 'no-database'
        : 'unreachable';
  const what =
    reason === 'authentication'
      ? 'the server refused the credentials'
      : reason === 'no-database'
        ? 'the database does not exist'
        : `the server could not be reached (${typeof code === 'string' ? code : (err as Error).message})`;
  return new UnavailableError(`the metadata database ${redactUrl(url)}: ${what}`, {
    details: { reason },
    cause: err,
  });
}
