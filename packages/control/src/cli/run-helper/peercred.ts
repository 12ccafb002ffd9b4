// The kernel's record of who is at the other end of a Unix socket (SO_PEERCRED, native/peercred.c, built
// by scripts/build-peercred.js): the run helper refuses every connection from another uid, and its client
// sends nothing to a listener of another uid. And flock, which Node lacks too: one run helper per data
// directory.
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';

interface PeerCredentials {
  readonly pid: number;
  readonly uid: number;
  readonly gid: number;
}

interface Addon {
  peerCredentials(fd: number): PeerCredentials;
  lockExclusive(fd: number): boolean;
}

let loaded: Addon | undefined;

/**
 * Loaded at first use, not at import: the client (in the executable's prelude) imports this module for
 * every `run`, and a missing or broken addon must only make it run in-process (the call throws).
 */
function addon(): Addon {
  loaded ??= createRequire(import.meta.url)('../../peercred.node') as Addon;
  return loaded;
}

/**
 * The peer of a connected Unix socket: for an accepted connection, the process that connected; for a
 * connection we made, the process that called listen() on the socket we reached (the kernel records it
 * then, whoever holds the descriptor later).
 */
export function peerOf(socket: Socket): PeerCredentials {
  // net.Socket has no public fd; its libuv handle does (a Pipe on Unix).
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) throw new Error('the connection has no descriptor');
  return addon().peerCredentials(fd);
}

/** flock(fd, LOCK_EX | LOCK_NB): true when this process now holds the lock, false when another does. */
export function lockExclusive(fd: number): boolean {
  return addon().lockExclusive(fd);
}
