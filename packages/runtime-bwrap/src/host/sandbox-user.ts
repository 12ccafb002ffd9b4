// The host identity sandbox processes run as (docs/contract.md §4): never host root. A control plane
// running as root starts bwrap as a dedicated unprivileged system user (created by scripts/setup), so the
// sandbox's user namespace maps its uid 1000 to that user, not to root, and nothing inside has any
// capability on the host. A control plane that is not root runs bwrap as itself (already unprivileged).
import { readFileSync } from 'node:fs';
import { UnavailableError } from '@agentfense/protocol';

/** The user scripts/setup creates (no login shell, no home). */
export const DEFAULT_SANDBOX_USER = 'agentfense-sandbox';
/** Environment variable naming another user (name or numeric uid). */
export const SANDBOX_USER_ENV = 'AGENTFENSE_SANDBOX_USER';

/** The host uid/gid bwrap is started as; null: the control plane's own (it is not root). */
export type HostIdentity = { readonly uid: number; readonly gid: number; readonly name: string } | null;

/** How to create the default user by hand (also what scripts/setup runs). */
export const CREATE_USER_HINT =
  'run `bash scripts/setup`, or `useradd --system --user-group --no-create-home --home-dir /nonexistent ' +
  `--shell /usr/sbin/nologin ${DEFAULT_SANDBOX_USER}\`, or name another unprivileged user in ` +
  `$${SANDBOX_USER_ENV}`;

/**
 * Resolves the sandbox user from /etc/passwd (a name or a numeric uid). Returns null when this process
 * is not root (bwrap then runs as the caller). Throws UnavailableError for a missing user or for root.
 */
export function resolveSandboxUser(
  configured: string | number | undefined,
  options: { passwdFile?: string; processUid?: number } = {},
): HostIdentity {
  const processUid = options.processUid ?? process.getuid?.() ?? 0;
  if (processUid !== 0) return null;
  const wanted = String(configured ?? process.env[SANDBOX_USER_ENV] ?? DEFAULT_SANDBOX_USER);
  let passwd: string;
  try {
    passwd = readFileSync(options.passwdFile ?? '/etc/passwd', 'utf8');
  } catch (err) {
    throw new UnavailableError(`cannot read the user database to find ${wanted}: ${(err as Error).message}`);
  }
  for (const line of passwd.split('\n')) {
    const [name, , uid, gid] = line.split(':');
    if (name === undefined || uid === undefined || gid === undefined) continue;
    if (name !== wanted && uid !== wanted) continue;
    const identity = { name, uid: Number(uid), gid: Number(gid) };
    if (identity.uid === 0 || identity.gid === 0) {
      throw new UnavailableError(
        `the sandbox user ${wanted} is root (uid/gid 0): sandbox processes must never run as host root; ${CREATE_USER_HINT}`,
      );
    }
    return identity;
  }
  throw new UnavailableError(`the sandbox user ${wanted} does not exist on this host: ${CREATE_USER_HINT}`);
}
