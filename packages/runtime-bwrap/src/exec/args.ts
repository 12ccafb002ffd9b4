// The bwrap command line of one sandboxed command, as a pure function of a spec (no I/O, no clock, no env).
//
// Ordering rules (bwrap applies its options strictly left to right):
//  1. Namespace and process flags come first; their order does not matter, but keeping them first makes
//     the audit argv easy to read.
//  2. Mounts are applied in order and a later mount shadows an earlier one at the same or a parent path.
//     So: system directories and /etc first (a file bound inside one of them must come after it), then
//     /proc, /dev and the /tmp tmpfs, then directories created inside /tmp, and the workspace LAST so
//     nothing can ever be mounted over /workspace.
//  3. `--clearenv` must precede every `--setenv`: bwrap clears the environment at the moment it parses
//     `--clearenv`, so a `--setenv` before it would be lost.
//  4. `--info-fd`/`--block-fd` (the cgroup handshake) may sit anywhere before the command.
//  5. `--` ends bwrap's options, so a command whose argv[0] starts with `-` is never read as an option.
import { validateCommand, validateCwd, validateEnv } from '@agentfense/protocol';

/** The uid/gid the command runs as inside the sandbox (an unprivileged user without capabilities). */
export const SANDBOX_UID = 1000;
export const SANDBOX_GID = 1000;
/** Where the workspace (the FUSE mount) appears inside the sandbox; also the default cwd. */
export const WORKSPACE_DIR = '/workspace';
/** HOME inside the sandbox: on the private /tmp so dotfiles never land in (and pollute) the workspace. */
export const SANDBOX_HOME = '/tmp/home';
/** Hostname inside the sandbox's own UTS namespace (the host's name is not revealed). */
export const SANDBOX_HOSTNAME = 'agentfense';

/** The environment every command starts from; caller env may override any of these. */
export const BASE_ENV: Readonly<Record<string, string>> = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  HOME: SANDBOX_HOME,
  LANG: 'C.UTF-8',
  TERM: 'dumb',
};

/** One read-only piece of the host system made visible inside the sandbox. */
export type SystemMount =
  /** `--ro-bind` (or `--ro-bind-try` when `optional`: skipped if the host path does not exist). */
  | { readonly kind: 'ro-bind'; readonly source: string; readonly dest: string; readonly optional?: boolean }
  /** `--symlink target dest`, e.g. Debian's merged-usr `/bin -> usr/bin`. */
  | { readonly kind: 'symlink'; readonly target: string; readonly dest: string };

/** File descriptors of the cgroup handshake: bwrap reports its child pid, then waits to be released. */
export interface CgroupHandshakeFds {
  /** bwrap writes `{"child-pid": N}` here once the sandbox's pid 1 exists. */
  readonly infoFd: number;
  /** bwrap's pid 1 blocks on reading one byte here before it forks the command. */
  readonly blockFd: number;
}

/** Everything that decides the bwrap argv of one command. */
export interface BwrapSpec {
  /** Host directory bound read-write at /workspace. */
  readonly workspaceHostPath: string;
  /**
   * A long-lived process's anchor (relay.ts): bound at /workspace first, under the workspace, so a
   * worker remounted later propagates into the running process.
   */
  readonly workspaceAnchor?: string;
  /**
   * With an anchor: false binds the anchor alone. For a process started before the worker's mount exists
   * (the launcher, started with the sandbox): the mount then propagates onto the anchor's bare directory,
   * whereas a bind of the bare workspace on top would hide it for good. Default true.
   */
  readonly workspaceOverAnchor?: boolean;
  /** Read-only system directories, files and symlinks, in mount order. */
  readonly systemMounts: readonly SystemMount[];
  /**
   * The command stays in the network namespace bwrap is started in: the sandbox's own, made and policed by
   * the host (packages/network; launch.ts starts bwrap inside it). False (default): a fresh namespace with
   * only a loopback. Never the host's.
   */
  readonly joinsNetns?: boolean;
  /** Caller environment (sandbox env, then exec env), on top of BASE_ENV. Names are validated. */
  readonly env?: Readonly<Record<string, string>>;
  /** Working directory inside the sandbox; absolute and normalised; default /workspace. */
  readonly cwd?: string;
  /** A string runs through `/bin/sh -c`; an array is the argv itself. */
  readonly command: string | readonly string[];
  /** Present when the command must be held until its cgroups are joined (resource limits). */
  readonly cgroupHandshake?: CgroupHandshakeFds;
  /** `--info-fd` alone (no cgroups): bwrap reports its pid 1 so a kill can take the namespace down. */
  readonly infoFd?: number;
  /**
   * The sandbox's own devpts on the host (devpts.ts), bound over /dev/pts: its ptys are bounded. Absent
   * (a control plane that is not root): bwrap's own devpts, which has no bound.
   */
  readonly devptsHostPath?: string;
  /** Size of the private /tmp tmpfs in bytes (absent: the kernel's default, half of RAM). */
  readonly tmpBytes?: number;
  /** fd from which bwrap loads the seccomp BPF program (seccomp.ts). */
  readonly seccompFd?: number;
  /**
   * The command is the sandbox's pid 1 (`--as-pid-1`: no bwrap init in between). Used for af-init, the
   * per-sandbox launcher (launcher.ts): inside its pid namespace nothing can signal pid 1 without a handler
   * (the kernel drops SIGKILL/SIGSTOP sent to a namespace's init from inside), and it reaps orphans.
   */
  readonly asPid1?: boolean;
  /**
   * Read-only files whose content bwrap copies from an fd (`--perms 0555 --ro-bind-data FD DEST`): the
   * launcher's binary, so no host path of it shows inside (mountinfo shows a deleted tmpfs file).
   */
  readonly dataFiles?: readonly { readonly fd: number; readonly dest: string }[];
}

/** The argv of the command itself (after bwrap's `--`): a string runs through `/bin/sh -c`. */
export function commandArgv(command: string | readonly string[]): string[] {
  return typeof command === 'string' ? ['/bin/sh', '-c', command] : [...command];
}

/** Builds the bwrap arguments (without the `bwrap` executable itself) for one command. Pure. */
export function buildBwrapArgs(spec: BwrapSpec): string[] {
  const cwd = validateCwd(spec.cwd ?? WORKSPACE_DIR);
  const env = validateEnv({ ...BASE_ENV, ...spec.env });
  validateCommand(spec.command);
  const args: string[] = [];

  // --- Namespaces and process flags ---
  // die-with-parent: if the control plane dies, the sandbox dies with it (no orphaned agents).
  // new-session: setsid(), so the command cannot inject input into a controlling terminal (TIOCSTI).
  // unshare-user + uid/gid 1000: an unprivileged user inside. bwrap runs as the unprivileged sandbox user
  // (sandbox-user.ts), so the namespaces map to that host uid, never to root. (bwrap nests a second user
  // namespace to mount /dev's devpts as root of the first and then become uid 1000: /proc/self/uid_map
  // inside reads `1000 0 1`, where 0 is the first namespace's root, itself the sandbox user on the host.)
  // disable-userns: no nested user namespaces, which would hand the command a full capability set in a
  // namespace of its own (a large kernel attack surface) and let it remount its view of the filesystem.
  // The seccomp filter denies them too (unshare/clone with CLONE_NEWUSER, clone3).
  // unshare-pid: a private pid namespace; the host's processes are invisible, and when bwrap's pid 1 dies
  // the kernel kills every process left in it — this is how a timeout kills the whole tree.
  // unshare-ipc/uts: no shared SysV IPC or POSIX message queues with the host; own hostname.
  // unshare-cgroup-try: the command sees its own cgroup as the root (skipped where the kernel lacks it).
  args.push('--die-with-parent', '--new-session');
  args.push('--unshare-user', '--uid', String(SANDBOX_UID), '--gid', String(SANDBOX_GID), '--disable-userns');
  args.push('--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try');
  if (spec.asPid1 === true) args.push('--as-pid-1');
  // unshare-net: a fresh network namespace that only has a loopback device, unless the sandbox has a
  // network namespace of its own (made by the host, policed by its policy point), which bwrap inherits.
  if (spec.joinsNetns !== true) args.push('--unshare-net');
  args.push('--hostname', SANDBOX_HOSTNAME);

  // --- Mounts: read-only system directories and files ---
  // The root is an empty tmpfs; only what is listed here exists. Nothing of /home, /root, /var or the
  // control plane's data directory is visible.
  for (const mount of spec.systemMounts) {
    if (mount.kind === 'symlink') args.push('--symlink', mount.target, mount.dest);
    else args.push(mount.optional === true ? '--ro-bind-try' : '--ro-bind', mount.source, mount.dest);
  }

  // --- /dev, /proc and /tmp ---
  // proc: a new procfs for the new pid namespace: /proc/1 is bwrap's init, not the host's.
  // dev: a minimal devtmpfs-like /dev (null, zero, full, random, urandom, tty, pts) without host devices;
  // its /dev/ptmx is a symlink to pts/ptmx, so it opens the devpts bound over /dev/pts below.
  // tmpfs /tmp: private to this bwrap (each command's, or the sandbox's with the per-sandbox launcher,
  // where /tmp lasts across its commands as in a Docker sandbox); HOME lives inside it.
  // /proc/sys and /proc/sysrq-trigger are covered read-only (bound from the host's, which exist): sysctls
  // are host-wide state (core_pattern runs a program as host root), never the sandbox's to change.
  // tmpfs /tmp: capped (its pages also count against the memory cgroup).
  args.push('--proc', '/proc', '--ro-bind', '/proc/sys', '/proc/sys');
  args.push('--ro-bind-try', '/proc/sysrq-trigger', '/proc/sysrq-trigger', '--dev', '/dev');
  // The sandbox's own devpts over the one `--dev` made (bwrap sets no `max=` and takes no devpts options):
  // at most SANDBOX_PTY_MAX ptys, shared by all its commands, so it cannot take the host's (devpts.ts).
  // --dev-bind, not --bind: bwrap's --bind adds nodev, and ptmx would then fail to open (EACCES).
  if (spec.devptsHostPath !== undefined) args.push('--dev-bind', spec.devptsHostPath, '/dev/pts');
  if (spec.tmpBytes !== undefined) args.push('--size', String(spec.tmpBytes));
  args.push('--tmpfs', '/tmp', '--dir', SANDBOX_HOME);
  for (const file of spec.dataFiles ?? [])
    args.push('--perms', '0555', '--ro-bind-data', String(file.fd), file.dest);

  // --- The workspace (last, so nothing shadows it) ---
  // Read-write on purpose: the FUSE layer behind this path enforces the permission rules, so writes must
  // reach it; a read-only bind would make every write fail with EROFS regardless of the rules.
  // An anchor goes first, beneath it: the mount the workspace's copy sits on then follows the host's
  // unmounts and remounts of the worker (relay.ts).
  if (spec.workspaceAnchor !== undefined) args.push('--bind', spec.workspaceAnchor, WORKSPACE_DIR);
  if (spec.workspaceAnchor === undefined || spec.workspaceOverAnchor !== false)
    args.push('--bind', spec.workspaceHostPath, WORKSPACE_DIR);

  // --- Environment ---
  // Nothing of the control plane's environment leaks: clear first, then set each variable explicitly.
  args.push('--clearenv');
  for (const [name, value] of Object.entries(env)) args.push('--setenv', name, value);

  // --- Process state ---
  args.push('--chdir', cwd);
  // No capabilities at all, even inside the user namespace (bwrap would otherwise keep none for a
  // non-root uid, but this makes it explicit and survives a future `--uid 0`).
  args.push('--cap-drop', 'ALL');
  // Seccomp: the shared deny list (seccomp.ts), loaded last, just before the command is executed.
  if (spec.seccompFd !== undefined) args.push('--seccomp', String(spec.seccompFd));

  // --- Cgroup handshake ---
  if (spec.cgroupHandshake !== undefined) {
    args.push(
      '--info-fd',
      String(spec.cgroupHandshake.infoFd),
      '--block-fd',
      String(spec.cgroupHandshake.blockFd),
    );
  } else if (spec.infoFd !== undefined) {
    // Without cgroups we still want the sandbox's pid 1, to kill its namespace directly (launch.ts).
    args.push('--info-fd', String(spec.infoFd));
  }

  // --- Command ---
  args.push('--', ...commandArgv(spec.command));
  return args;
}
