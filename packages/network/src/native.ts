// The policy point's addon (native/netns.c, built by scripts/build-netns.js into dist/netns.node).
import { closeSync, openSync } from 'node:fs';
import { createRequire } from 'node:module';

interface Addon {
  openInNetns(nsFd: number, family: 4 | 6, type: 'tcp' | 'udp', address: string, port: number): number;
  originalDestination(fd: number): { address: string; port: number };
  /** prctl(PR_SET_DUMPABLE, 0): no core dump, /proc/<pid> of this process closed to other uids. */
  notDumpable(): void;
  isDumpable(): boolean;
}

let loaded: Addon | undefined;

/** Loaded at first use: only a sandbox with a network policy needs it. */
export function netnsAddon(): Addon {
  // From src/ (tests through the source condition) and dist/ alike, the addon sits in dist/.
  const url = new URL(
    import.meta.url.includes('/dist/') ? './netns.node' : '../dist/netns.node',
    import.meta.url,
  );
  loaded ??= createRequire(import.meta.url)(url.pathname) as Addon;
  return loaded;
}

/** The kernel descriptor behind a net.Socket (its libuv handle's; Node has no public accessor). */
export function socketFd(socket: object): number {
  const fd = (socket as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) throw new Error('the connection has no descriptor');
  return fd;
}

/**
 * A bound socket inside the namespace at `nsPath` (TCP: listening), for Node to adopt (`listen({ fd })`,
 * `bind({ fd })`). The policy point's listeners are made this way; tests run their servers so too.
 */
export function openSocketInNetns(
  nsPath: string,
  socket: { family: 4 | 6; type: 'tcp' | 'udp'; address: string; port: number },
): number {
  const ns = openSync(nsPath, 'r');
  try {
    return netnsAddon().openInNetns(ns, socket.family, socket.type, socket.address, socket.port);
  } finally {
    closeSync(ns);
  }
}

/**
 * Marks this process not dumpable (no core dump; its /proc closed to other uids and to ptrace without
 * CAP_SYS_PTRACE): a process that holds secret values does this before it takes the first one.
 */
export function markNotDumpable(): void {
  netnsAddon().notDumpable();
}

/** Whether this process may dump core (tests of markNotDumpable). */
export function isDumpable(): boolean {
  return netnsAddon().isDumpable();
}
