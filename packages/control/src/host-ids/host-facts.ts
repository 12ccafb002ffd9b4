// What the host says about a uid before it is leased to a sandbox: whether a host account or group has
// it, whether any process runs under it, and whether the owner of an earlier lease still exists. Read
// synchronously on purpose: they are consulted inside the lease table's transaction (leases.ts).
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { isSameProcess } from '@agentfense/protocol';

/** Every uid /etc/passwd names and every gid /etc/group names: never leased to a sandbox. */
export function hostAccountIds(files = { passwd: '/etc/passwd', group: '/etc/group' }): Set<number> {
  const ids = new Set<number>();
  for (const file of [files.passwd, files.group]) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      // A host without the file has no accounts there.
    }
    for (const line of text.split('\n')) {
      const id = Number(line.split(':')[2]);
      if (line.trim() !== '' && Number.isSafeInteger(id)) ids.add(id);
    }
  }
  return ids;
}

/**
 * Every uid and gid a process of the host runs under (real, effective, saved, filesystem), from
 * /proc/<pid>/status. Reads every process (~50 ms for 120 processes on the busy 2-core host), so the
 * lease table asks only when it reuses a uid whose owner vanished without releasing it.
 */
export function idsInUse(proc = '/proc'): Set<number> {
  const ids = new Set<number>();
  let entries: string[];
  try {
    entries = readdirSync(proc);
  } catch {
    return ids;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let status: string;
    try {
      status = readFileSync(`${proc}/${entry}/status`, 'latin1');
    } catch {
      continue; // exited meanwhile
    }
    for (const key of ['Uid', 'Gid']) {
      const line = new RegExp(`^${key}:\\s+(.*)$`, 'm').exec(status)?.[1] ?? '';
      for (const id of line.trim().split(/\s+/)) if (id !== '') ids.add(Number(id));
    }
  }
  return ids;
}

/** Prefix of a lease owned by a sandbox's directory (it exists from the sandbox's creation to its destroy). */
export const DIR_OWNER = 'dir:';
/**
 * Prefix of a lease owned by a process: `process:<pid>:<start time>/<tag>` (a docker pool's idle
 * containers, one tag each).
 */
export const PROCESS_OWNER = 'process:';

/** The owner string of a lease held by a directory. */
export function dirOwner(path: string): string {
  return `${DIR_OWNER}${path}`;
}

/** The owner string of a lease held by a process (`tag` tells its leases apart). */
export function processOwner(pid: number, start: string, tag: string): string {
  return `${PROCESS_OWNER}${String(pid)}:${start}/${tag}`;
}

/**
 * Whether the owner of a lease still exists: its directory (a destroyed sandbox's is gone, also when its
 * whole data directory was removed), or its process (the same pid with the same start time). An owner
 * this version cannot read counts as existing: its lease is never taken away.
 */
export function ownerExists(owner: string): boolean {
  if (owner.startsWith(DIR_OWNER)) {
    try {
      return statSync(owner.slice(DIR_OWNER.length)).isDirectory();
    } catch (err) {
      return (err as NodeJS.ErrnoException).code !== 'ENOENT';
    }
  }
  if (owner.startsWith(PROCESS_OWNER)) {
    const rest = owner.slice(PROCESS_OWNER.length).split('/')[0] ?? '';
    const colon = rest.indexOf(':');
    return isSameProcess(Number(rest.slice(0, colon)), rest.slice(colon + 1));
  }
  return true;
}
