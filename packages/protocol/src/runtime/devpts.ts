// Each sandbox's ptys come from a devpts instance of its own with a bound (`max=`). The kernel counts ptys
// per host (`kernel.pty.max`, of which `kernel.pty.reserve` is kept for the host's initial devpts), not
// per user, and a devpts mounted without `max=` (bwrap's `--dev`, Docker's /dev/pts) may take every pty
// the other instances share: one sandbox could leave every other sandbox and container of the host none.
// The runtime's control plane (root) mounts the instance on the host and binds it over the sandbox's
// /dev/pts (docs/decisions.md, "Each sandbox has a devpts of its own, bounded").

/**
 * How many ptys one sandbox may hold at once. A terminal multiplexer, an expect-style test suite or a few
 * parallel pty-driven workers use tens; 256 leaves room for those and lets twelve sandboxes each hold
 * all of theirs within the 3,072 a default host (`kernel.pty.max` 4096, reserve 1024) shares.
 */
export const SANDBOX_PTY_MAX = 256;

/**
 * The options of a sandbox's devpts (mount(8)'s `-o`): a new instance (never the host's), no setuid or
 * executable files, the master node open to every user (`ptmxmode=0666`: it is root's, the mounter's,
 * and the sandbox's user must open it) and each pty its opener's, `0620`, as bwrap and Docker make them;
 * at most `max` ptys. No `gid=`: a pty gets its opener's group, which is the sandbox's own.
 */
export function devptsMountOptions(max: number = SANDBOX_PTY_MAX): string {
  if (!Number.isSafeInteger(max) || max < 1)
    throw new RangeError(`pty max must be a positive integer, got ${String(max)}`);
  return `nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,max=${String(max)}`;
}
