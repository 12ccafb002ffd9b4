// A PostgreSQL URL as `serve --database` takes it: checked before anything opens, and shown only with
// its password replaced. No `pg` here: `serve` loads the driver only when a URL is given.
import { InvalidArgumentError } from '@agentfense/protocol';

/** Why the metadata database could not be used (in an error's `details.reason`). */
export type PostgresFailure =
  'invalid-url' | 'unreachable' | 'authentication' | 'no-database' | 'schema-newer';

/** The URL as it may be shown: its password replaced by `***`. Unparsable input is not echoed. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(an unparsable URL)';
  }
}

/** Checks a `postgres://` or `postgresql://` URL naming a database; InvalidArgumentError otherwise. */
export function checkPostgresUrl(url: string): void {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  const problem =
    parsed === undefined
      ? 'it is not a URL'
      : parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:'
        ? `its scheme is ${parsed.protocol.replace(/:$/, '')}, not postgres or postgresql`
        : parsed.pathname.replace(/^\//, '') === ''
          ? 'it names no database (postgres://user@host/DATABASE)'
          : undefined;
  if (problem !== undefined) {
    throw new InvalidArgumentError(`--database ${redactUrl(url)}: ${problem}`, {
      details: { reason: 'invalid-url' satisfies PostgresFailure },
    });
  }
}
