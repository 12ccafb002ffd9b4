// The docker command lines of a sandbox, as pure functions of a spec (no I/O, no clock, no env):
// `docker run` creates the sandbox's one long-lived container, `docker exec` runs each command in it.
//
// Ordering and form rules:
//  1. Every caller-controlled value is one argv element (`--env NAME=VALUE`, `--workdir DIR`): never a shell
//     string. The only shell text is our own constant wrapper script (WRAPPER_SCRIPT), which receives the
//     command as positional parameters ("$@") and never interpolates it.
//  2. The image is the last option-position argument of `docker run`; the keep-alive command follows it, so a
//     value starting with `-` after the image can never be read as a docker option.
//  3. `--mount` takes a CSV field list: the source path is quoted as one CSV field, so commas and quotes in a
//     host path cannot inject mount options.
//  4. The container's pid 1 is af-init (launcher.ts): it reaps the orphans of killed commands, spawns
//     commands on the host's request, and exits only when its connection to the host closes. Without a
//     launcher it is docker's init (`--init`, tini) running `sleep infinity`.
import type { EnforcedLimits } from '@agentfense/protocol';
import { devptsMountOptions, validateCommand, validateCwd, validateEnv } from '@agentfense/protocol';

/**
 * The uid:gid every process runs as inside the container (an unprivileged user, no capabilities). There is
 * no user-namespace remap, so it is also the host uid of the sandbox's processes: a dedicated id far above
 * login users (1000…), Debian's reserved ranges (60000…65535) and the usual subordinate-id ranges, so no
 * real host user owns what a sandbox starts (check() refuses a host where one does). Configurable with
 * the runtime's `user` option.
 */
export const SANDBOX_USER = '2000000000:2000000000';
/** Where the launcher directory (launcher.ts) appears inside the container. */
export const LAUNCHER_DIR = '/.agentfense';
/** af-init inside the container (the container's entrypoint). */
export const LAUNCHER_ENTRYPOINT = `${LAUNCHER_DIR}/af-init`;
/** The socket af-init connects to, inside the container. */
export const LAUNCHER_SOCKET = `${LAUNCHER_DIR}/sock`;
/** af-init's arguments (the container's command). */
export const LAUNCHER_ARGS: readonly string[] = ['--connect', LAUNCHER_SOCKET];
/** Where the workspace (the FUSE mount) appears inside the container; also the default cwd. */
export const WORKSPACE_DIR = '/workspace';
/**
 * The container's /dev/pts: an anonymous volume of the engine's `local` driver that is a devpts instance of
 * the container's own with `max=` (@agentfense/protocol runtime/devpts.ts). It replaces the engine's
 * default devpts, which has no bound: ptys are counted per host, so one container could take every pty
 * the host's other devpts instances share. The engine mounts it when the container starts and removes it
 * with the container (`v=true`), pooled or not.
 */
export const DEVPTS_DIR = '/dev/pts';
/** The volume driver's options of that devpts (`type`, `device`, `o` as mount(8) takes them). */
export const DEVPTS_VOLUME_OPTIONS: Readonly<Record<string, string>> = {
  type: 'devpts',
  device: 'devpts',
  o: devptsMountOptions(),
};
/** HOME inside the container: a private tmpfs owned by the sandbox user (the root filesystem is read-only). */
export const SANDBOX_HOME = '/home/agent';
/** Hostname inside the container (neither the host's name nor the container id is revealed). */
export const SANDBOX_HOSTNAME = 'agentfense';
/** The image a sandbox uses unless it names one: built locally by `agentfense setup docker`. */
export const DEFAULT_IMAGE = 'agentfense/base:latest';
/** Label carrying the sandbox id on every container we create (used to find leftovers). */
export const SANDBOX_LABEL = 'io.agentfense.sandbox';
/** Label carrying the sandbox's state directory (under the data dir): recovery removes containers by it. */
export const STATE_LABEL = 'io.agentfense.state-dir';
/**
 * Label of a pooled container (pool.ts): its owner process (`<pid>:<start time>`), so whoever finds one whose
 * owner is gone removes it. A pooled container's SANDBOX_LABEL is empty: labels cannot change after
 * creation; once claimed it is found by name (`agentfense-<id>`) and by the marker in the sandbox's stateDir.
 */
export const POOL_OWNER_LABEL = 'io.agentfense.pool-owner';
/** Label of a pooled container: its owner's pool directory (the slots its containers bind), for cleanup. */
export const POOL_DIR_LABEL = 'io.agentfense.pool-dir';

/**
 * The environment every command starts from (PATH comes from the image, or docker's standard PATH when the
 * image sets none); the sandbox's env and the exec's env override any of these.
 */
export const BASE_ENV: Readonly<Record<string, string>> = {
  HOME: SANDBOX_HOME,
  LANG: 'C.UTF-8',
  TERM: 'dumb',
};

/** What the wrapper writes first on stderr: this prefix, the command's session id (container pid), `\n`. */
export const SESSION_HEADER_PREFIX = 'AGENTFENSE-SESSION=';

/**
 * sh starts a background job with SIGINT and SIGQUIT ignored (no job control), and a shell cannot reset a
 * signal ignored on entry: GNU env's --default-signal (coreutils >= 8.31) can. Where it is missing
 * (busybox images) the command runs with them ignored. An argv[0] holding `=` would read as an assignment
 * to env, so such a command is exec'd directly.
 */
const RESTORE_SIGNALS =
  'case $1 in *=*) ;; *) /usr/bin/env --default-signal=INT,QUIT true 2>/dev/null && ' +
  'exec /usr/bin/env --default-signal=INT,QUIT -- "$@";; esac; ';

/**
 * Runs "$@" (the command) as the leader of a new session, so its whole tree can be found and killed:
 *  - `setsid` makes the command a session and process-group leader (docker exec itself already makes the
 *    wrapper a session leader, so the command is started as a background job, which never is one, and
 *    setsid does not fork: the pid it prints is the command's own);
 *  - before exec'ing the command it prints SESSION_HEADER_PREFIX + that id on stderr: always the first bytes
 *    of the container side's stderr, so the host learns which session to kill on a timeout;
 *  - stdin is passed through fd 3 (sh gives background jobs /dev/null otherwise), and SIGINT/SIGQUIT are
 *    reset to their defaults (RESTORE_SIGNALS);
 *  - PATH is pinned for the wrapper's own `setsid` lookup and restored for the command, so a caller's PATH
 *    cannot break the wrapper;
 *  - when the command exits, whatever it left running in its process group is killed (background jobs die
 *    with the command, as they do with bwrap's pid namespace), and the wrapper exits with the command's
 *    status (128 + n when a signal killed it).
 * `kill -9 -PGID` is the one spelling dash, bash and busybox all accept.
 */
export const WRAPPER_SCRIPT = [
  'p=$PATH',
  'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  'exec 3<&0',
  'setsid /bin/sh -c ' +
    `'PATH=$1; shift; printf "${SESSION_HEADER_PREFIX}%s\\n" "$$" >&2; ${RESTORE_SIGNALS}exec "$@"' agentfense-exec "$p" "$@" <&3 3<&- &`,
  'exec 3<&-',
  'wait "$!"',
  's=$?',
  'kill -9 "-$!" 2>/dev/null',
  'exit "$s"',
].join('\n');

/** Shown instead of WRAPPER_SCRIPT in audit records (the script is constant; the command follows it). */
export const WRAPPER_PLACEHOLDER = '<agentfense-session-wrapper>';

/**
 * Kills every process of session $1 (its process group, then any member that moved to another group),
 * repeating until none is left (a member may fork while we scan). Runs inside the container as the sandbox
 * user: the fallback when the host cannot see the container's cgroup (see cgroup.ts). Exit 1: gave up.
 */
export const KILL_SESSION_SCRIPT = [
  's=$1',
  'n=0',
  'while [ "$n" -lt 50 ]; do',
  '  n=$((n + 1))',
  '  found=0',
  '  kill -9 "-$s" 2>/dev/null && found=1',
  '  for d in /proc/[0-9]*; do',
  '    read -r l 2>/dev/null < "$d/stat" || continue',
  '    set -- ${l##*") "}',
  '    if [ "$4" = "$s" ]; then kill -9 "${d#/proc/}" 2>/dev/null && found=1; fi',
  '  done',
  '  [ "$found" = 0 ] && exit 0',
  'done',
  'exit 1',
].join('\n');

/** Everything that decides the `docker run` argv of a sandbox's container. */
export interface DockerRunSpec {
  /** `agentfense-<sandboxId>`. */
  readonly containerName: string;
  readonly sandboxId: string;
  readonly image: string;
  /** Host directory bound read-write at /workspace with rslave propagation. */
  readonly workspaceHostPath: string;
  /** BASE_ENV plus the sandbox env (names validated). */
  readonly env: Readonly<Record<string, string>>;
  /** The limits to apply: only the ones the engine enforces (null = not applied). */
  readonly limits: EnforcedLimits;
  /** The engine limits swap: memory+swap is capped at the memory limit (no swapping past it). */
  readonly swapLimit: boolean;
  /** Mount the image read-only (default true); /tmp and HOME are tmpfs either way. */
  readonly readOnlyRootfs?: boolean;
  /** uid:gid of the container's processes; default SANDBOX_USER. */
  readonly user?: string;
  /** More labels (e.g. the data directory), besides SANDBOX_LABEL. */
  readonly labels?: Readonly<Record<string, string>>;
  /** A seccomp profile (Docker's JSON) replacing the engine's default; absent: the engine's default. */
  readonly seccompProfile?: string;
  /** Size of /tmp (bytes); absent: the tmpfs default (half the RAM, charged to the memory limit). */
  readonly tmpBytes?: number | null;
  /**
   * The host directory of the container's launcher (launcher.ts): bound read-only at LAUNCHER_DIR, and
   * af-init is the container's pid 1. Absent: docker's init running `sleep infinity` (every command is an
   * engine exec).
   */
  readonly launcherDir?: string;
  /** Host files bound read-only at their destinations (the sandbox's files, container/files.ts). */
  readonly files?: readonly { readonly source: string; readonly dest: string }[];
}

/** Stands for the seccomp profile's JSON in audit records (it is long and constant). */
export const SECCOMP_PLACEHOLDER = '<agentfense-seccomp-profile>';

/** Quotes one CSV field the way docker's `--mount` parser (encoding/csv) reads it. */
export function csvField(value: string): string {
  return /[",\s]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

/** The `docker run` arguments (without the leading `docker`) that create a sandbox's container. */
export function buildRunArgs(spec: DockerRunSpec): string[] {
  const env = validateEnv(spec.env);
  const args = [
    'run',
    '--detach',
    // Never reach for a registry: a missing image is an error that names `agentfense setup docker`.
    '--pull',
    'never',
    '--name',
    spec.containerName,
    '--label',
    `${SANDBOX_LABEL}=${spec.sandboxId}`,
    ...Object.entries(spec.labels ?? {}).flatMap(([k, v]) => ['--label', `${k}=${v}`]),
    // --- process model: pid 1 is af-init (it reaps orphans and spawns commands), else docker's init
    // (tini) running `sleep infinity`; nothing is logged by pid 1 ---
    ...(spec.launcherDir === undefined ? ['--init'] : []),
    '--log-driver',
    'none',
    '--hostname',
    SANDBOX_HOSTNAME,
    // --- privileges: an unprivileged user, no capabilities, no way to gain any (setuid binaries included) ---
    '--user',
    spec.user ?? SANDBOX_USER,
    '--cap-drop',
    'ALL',
    '--security-opt',
    'no-new-privileges',
    ...(spec.seccompProfile === undefined ? [] : ['--security-opt', `seccomp=${SECCOMP_PLACEHOLDER}`]),
    // --- namespaces: private IPC and cgroup views; a network namespace with only a loopback (a network
    // policy polices it from the host: packages/network) ---
    '--ipc',
    'private',
    '--cgroupns',
    'private',
    '--network',
    'none',
    // --- filesystem: read-only image, private tmpfs /tmp and HOME, the workspace last ---
    ...(spec.readOnlyRootfs === false ? [] : ['--read-only']),
    '--tmpfs',
    `/tmp:rw,nosuid,nodev,mode=1777${spec.tmpBytes == null ? '' : `,size=${String(spec.tmpBytes)}`}`,
    '--tmpfs',
    `${SANDBOX_HOME}:rw,nosuid,nodev,uid=${userPart(spec.user, 0)},gid=${userPart(spec.user, 1)},mode=0700`,
    // the container's own devpts, bounded (DEVPTS_DIR): nocopy, the image's /dev/pts holds nothing
    '--mount',
    [
      'type=volume',
      `target=${DEVPTS_DIR}`,
      'volume-nocopy',
      'volume-driver=local',
      ...Object.entries(DEVPTS_VOLUME_OPTIONS).map(([k, v]) => csvField(`volume-opt=${k}=${v}`)),
    ].join(','),
    // rslave: a mount made later under the workspace on the host (a worker remounted after a crash) shows up
    // inside the running container. Docker requires the source to be on a shared or slave mount.
    '--mount',
    [
      'type=bind',
      `source=${csvField(spec.workspaceHostPath)}`,
      `target=${WORKSPACE_DIR}`,
      'bind-propagation=rslave',
    ].join(','),
    ...(spec.launcherDir === undefined
      ? []
      : [
          '--mount',
          ['type=bind', `source=${csvField(spec.launcherDir)}`, `target=${LAUNCHER_DIR}`, 'readonly'].join(
            ',',
          ),
        ]),
    ...(spec.files ?? []).flatMap((f) => [
      '--mount',
      ['type=bind', `source=${csvField(f.source)}`, `target=${csvField(f.dest)}`, 'readonly'].join(','),
    ]),
    '--workdir',
    WORKSPACE_DIR,
    // --- resource limits: per container, i.e. per sandbox (shared by all its commands) ---
    ...limitArgs(spec.limits, spec.swapLimit),
    // --- environment: explicit; docker adds PATH (the image's or its standard one) and HOSTNAME ---
    ...Object.entries(env).flatMap(([name, value]) => ['--env', `${name}=${value}`]),
    // --- pid 1's command: the image's entrypoint is replaced by af-init (or, without it, an idle sleep) ---
    '--entrypoint',
    spec.launcherDir === undefined ? 'sleep' : LAUNCHER_ENTRYPOINT,
    spec.image,
    ...(spec.launcherDir === undefined ? ['infinity'] : LAUNCHER_ARGS),
  ];
  return args;
}

/** The uid (0) or gid (1) of `user` (default SANDBOX_USER). */
export function userPart(user: string | undefined, index: 0 | 1): string {
  return (user ?? SANDBOX_USER).split(':')[index] ?? '';
}

/**
 * `docker update` arguments (without the leading `docker`) that give a pooled container a sandbox's limits;
 * null when there is nothing to set (a pooled container is created without limits).
 */
export function buildUpdateArgs(
  container: string,
  limits: EnforcedLimits,
  swapLimit: boolean,
): string[] | null {
  const args = limitArgs(limits, swapLimit);
  return args.length === 0 ? null : ['update', ...args, container];
}

/** `--memory`, `--pids-limit`, `--cpu-*` for the limits that are in force. */
function limitArgs(limits: EnforcedLimits, swapLimit: boolean): string[] {
  const args: string[] = [];
  if (limits.memoryBytes !== null) {
    args.push('--memory', String(limits.memoryBytes));
    // Without this docker allows as much swap again; with it the limit is the limit (like bwrap's memsw).
    if (swapLimit) args.push('--memory-swap', String(limits.memoryBytes));
  }
  if (limits.pidsLimit !== null) args.push('--pids-limit', String(limits.pidsLimit));
  if (limits.cpuQuota !== null) args.push('--cpu-period', '100000', '--cpu-quota', String(limits.cpuQuota));
  if (limits.cpuShares !== null) args.push('--cpu-shares', String(limits.cpuShares));
  return args;
}

/** Everything that decides the `docker exec` argv of one command. */
export interface DockerExecSpec {
  /** The container's id (or name). */
  readonly container: string;
  /** Exec-level environment (on top of the container's, which holds BASE_ENV and the sandbox env). */
  readonly env?: Readonly<Record<string, string>>;
  /** Working directory inside the container; absolute and normalised; default /workspace. */
  readonly cwd?: string;
  /** A string runs through `/bin/sh -c`; an array is the argv itself. */
  readonly command: string | readonly string[];
  /** Attach stdin (`--interactive`): when the caller passes stdin bytes, or for spawn's raw pipes. */
  readonly interactive: boolean;
  /** uid:gid the command runs as; default SANDBOX_USER. */
  readonly user?: string;
}

/** The `docker exec` arguments (without the leading `docker`) that run one command under the wrapper. */
export function buildExecArgs(spec: DockerExecSpec): string[] {
  validateCommand(spec.command);
  const env = validateEnv(spec.env ?? {});
  const cwd = validateCwd(spec.cwd ?? WORKSPACE_DIR);
  const command = typeof spec.command === 'string' ? ['/bin/sh', '-c', spec.command] : [...spec.command];
  return [
    'exec',
    ...(spec.interactive ? ['--interactive'] : []),
    '--user',
    spec.user ?? SANDBOX_USER,
    '--workdir',
    cwd,
    ...Object.entries(env).flatMap(([name, value]) => ['--env', `${name}=${value}`]),
    spec.container,
    '/bin/sh',
    '-c',
    WRAPPER_SCRIPT,
    'agentfense-wrapper',
    ...command,
  ];
}

/** The `docker exec` arguments of the in-container fallback that kills a command's session. */
export function buildKillArgs(container: string, sessionId: number): string[] {
  return [
    'exec',
    '--user',
    SANDBOX_USER,
    container,
    '/bin/sh',
    '-c',
    KILL_SESSION_SCRIPT,
    'agentfense-kill',
    String(sessionId),
  ];
}
