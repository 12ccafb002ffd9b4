// The host user a docker sandbox's processes run as: a numeric non-root uid:gid that no host account
// has (the sandbox's own leased one, or the runtime's fixed user), since the container's processes are
// that user on the host.
import { readFile } from 'node:fs/promises';
import type { HostUser } from '@agentfense/protocol';
import { InvalidArgumentError, UnavailableError } from '@agentfense/protocol';

/** A sandbox's own user as `uid:gid`, refused if it is not a numeric non-root one or a host account's. */
export async function sandboxUser(user: HostUser): Promise<string> {
  const spec = validateUser(`${String(user.uid)}:${String(user.gid)}`);
  await refuseHostUser(spec);
  return spec;
}

/** A numeric, non-root uid:gid. */
export function validateUser(user: string): string {
  const m = /^(\d{1,10}):(\d{1,10})$/.exec(user);
  if (m === null || Number(m[1]) === 0 || Number(m[1]) > 4_294_967_294 || Number(m[2]) > 4_294_967_294) {
    throw new InvalidArgumentError(`user must be a numeric non-root uid:gid, got ${JSON.stringify(user)}`);
  }
  return user;
}

/**
 * Refuses a container uid that belongs to a host account (/etc/passwd): the sandbox's processes would run
 * as that user on the host (and could signal its processes, read its files through shared mounts).
 */
export async function refuseHostUser(user: string): Promise<void> {
  const uid = user.split(':')[0];
  const passwd = await readFile('/etc/passwd', 'utf8').catch(() => '');
  const owner = passwd.split('\n').find((line) => line.split(':')[2] === uid);
  if (owner !== undefined) {
    throw new UnavailableError(
      `the docker sandbox uid ${String(uid)} belongs to host user ${owner.split(':')[0] ?? '?'}: sandboxes must ` +
        'run under a uid no host user has; choose another with the runtime option `user`',
    );
  }
}
