// The shell text of the session protocol: the bootstrap that wires the shell to a relay, the setup that
// defines the protocol's functions, and the text written for each command. How it fits together is in
// README.md ("Framing"); the invariants each piece relies on are next to it.
import { printfFormat, singleQuote } from './quote.js';

/** The shells a session may run (contract §5: /bin/sh by default, /bin/bash selectable). */
export const SESSION_SHELLS = ['/bin/sh', '/bin/bash'] as const;
export type SessionShell = (typeof SESSION_SHELLS)[number];

/**
 * Interactive on purpose: only an interactive shell answers SIGINT by abandoning the command it is running
 * (even a builtin loop such as `while :; do :; done`) and reading the next one, which is how a timed-out
 * command is interrupted while the shell and its state survive. bash: no rc files, no line editing (stdin
 * is a pipe, not a terminal).
 */
const SHELL_FLAGS: Record<SessionShell, readonly string[]> = {
  '/bin/sh': ['-i'],
  '/bin/bash': ['--norc', '--noprofile', '--noediting', '-i'],
};

/**
 * Run by `/bin/sh -c` with `$1` = a fresh private directory path and the rest = the session shell's argv.
 *
 * - The host's stdin pipe is the control channel. Only the relay (a background subshell) reads it; it
 *   forwards lines that start with `.` (minus the dot) into a FIFO that becomes the shell's stdin, and
 *   acts on `!INT` / `!KILL` itself. So the host can signal a busy shell: the relay is always reading.
 * - `!INT` is SIGINT to the process group: the shell abandons its command; the command's processes die;
 *   background jobs survive (a shell without job control starts them with SIGINT ignored), as does the
 *   relay (same reason). pid 1 (bwrap's init) ignores it: init only gets signals it handles.
 * - `!KILL` is the escalation: SIGKILL to every process of the group except the shell, the relay and pid 1.
 * - The relay writes nothing to the session's stdout/stderr (2>/dev/null) and holds no copy of them, so a
 *   stream ends when the shell and its jobs are gone. The shell keeps no copy of the control pipe (fd 3 is
 *   closed before exec), so no command can read the protocol.
 * - The shell replaces this process (`exec`): when it exits, the runtime's process ends, and with bwrap the
 *   pid namespace (relay and background jobs included) goes with it.
 * - A runtime may start us with SIGINT ignored (Docker's exec wrapper runs the command as a background
 *   job, which a shell without job control starts so). No shell can undo that for itself, and a shell that
 *   ignored SIGINT on entry ignores it for good, so it could never be interrupted: when SIGINT's bit (0x2) of
 *   SigIgn is set, the shell is started through `env --default-signal=INT` (GNU coreutils ≥ 8.31) where it exists.
 */
export const BOOTSTRAP = `d=$1; shift
mkdir -m 700 -- "$d" && mkfifo -m 600 -- "$d/in" || exit 125
__af_kill_group() {
  for __p in /proc/[0-9]*; do
    __p=\${__p#/proc/}
    case $__p in 1|"$$"|"$__me") continue ;; esac
    read -r __s 2>/dev/null <"/proc/$__p/stat" || continue
    set -- \${__s##*) }
    [ "$3" != "$__pg" ] || kill -KILL "$__p" 2>/dev/null
  done
}
__af_relay() {
  read -r __s </proc/self/stat
  __me=\${__s%% *}
  set -- \${__s##*) }
  __pg=$3
  while IFS= read -r __l; do
    case $__l in
      .*) printf '%s\\n' "\${__l#.}" ;;
      '!INT') kill -INT 0 ;;
      '!KILL') __af_kill_group ;;
    esac
  done
}
__af_ign=
while read -r __k __v; do [ "$__k" != SigIgn: ] || __af_ign=$__v; done </proc/self/status
case $__af_ign in
  *[2367abefABEF]) if env --default-signal=INT true 2>/dev/null; then set -- env --default-signal=INT "$@"; fi ;;
esac
exec 3<&0
__af_relay <&3 3<&- >"$d/in" 2>/dev/null &
exec 3<&- <"$d/in"
rm -f -- "$d/in"
exec "$@"
`;

/** The runtime argv that starts a session: the bootstrap, then the shell. */
export function sessionArgv(options: { shell: SessionShell; dir: string }): string[] {
  return [
    '/bin/sh',
    '-c',
    BOOTSTRAP,
    'agentfense-session',
    options.dir,
    options.shell,
    ...SHELL_FLAGS[options.shell],
  ];
}

/** printf spelling of the trailer (see trailer.ts): `\x1fagentfense:<nonce>:<status>\n`. */
const TRAILER_FORMAT = String.raw`'\037agentfense:%s:%d\n'`;

/**
 * Defines the protocol inside the shell, then prints the first trailer (`ready`). Every line must survive
 * whatever options a command later sets (`set -u`, `set -C`, `set -e`) and must never raise a shell error:
 * an interactive shell answers an error by discarding the rest of its input, which would lose a trailer.
 * - fds 8/9: copies of the session's stdout/stderr for trailers, so `exec >file` in a command redirects
 *   later output (as in a terminal) without hiding the trailers. Commands run with 8 and 9 closed.
 * - `__af_r S` restores `$?` of the previous command (skipped under `set -e`, where a failing status would
 *   exit the shell). `__af_in FMT` writes a command's stdin to a private file. `__af_t NONCE [x]` prints
 *   the trailers and empties that file.
 * - Prompts are emptied (and re-emptied after every command) so the shell prints nothing between commands.
 */
export function setupScript(options: { dir: string; readyNonce: string }): Buffer {
  const dir = singleQuote(Buffer.from(options.dir)).toString('latin1');
  return Buffer.from(
    [
      'PS1= PS2= PS0=',
      'command set +H 2>/dev/null; command set +o history 2>/dev/null',
      `__af_d=${dir}`,
      '__af_r() { case $- in *e*) return 0 ;; esac; return "$1"; }',
      '__af_in() { printf "$1" >|"$__af_d/stdin"; }',
      `__af_t() { __af_s=$?; PS1= PS2= PS0=; printf ${TRAILER_FORMAT} "$1" "$__af_s" >&8; printf ${TRAILER_FORMAT} "$1" "$__af_s" >&9; [ -z "\${2-}" ] || : >|"$__af_d/stdin"; return 0; }`,
      'exec 8>&1 9>&2',
      `__af_t ${options.readyNonce}`,
      '',
    ].join('\n'),
    'latin1',
  );
}

export interface CommandScriptOptions {
  /** The command's bytes (no NUL). */
  readonly command: Uint8Array;
  readonly nonce: string;
  /** `$?` the command sees: the previous command's status. */
  readonly previousStatus: number;
  /** Bytes for the command's stdin; absent: /dev/null. */
  readonly stdin?: Uint8Array;
  /** The workspace was remounted since the last command: re-enter the shell's cwd first. */
  readonly reenterCwd?: boolean;
}

/**
 * After a worker restart the shell's working directory is a directory of the dead mount (every relative
 * path fails with ENOTCONN), though the same path now leads into the new mount. `cd` to the shell's own
 * logical `$PWD` re-resolves it; `command` skips a user function named cd; OLDPWD is kept (`cd -` still
 * goes where it went); a directory that no longer exists leaves the shell where it was, as a terminal
 * would. Survives `set -u`/`-e`/`-C` (see setupScript).
 */
const REENTER_CWD = '__af_o=${OLDPWD-};command cd -- "$PWD" 2>/dev/null||:;OLDPWD=$__af_o;';

/**
 * One command, as one complete shell command (the quoted text may span lines). The command is data: it
 * sits in single quotes and `eval` parses it, on its own lines with a newline after it, so a trailing
 * comment, `&`, a heredoc or an unbalanced quote stay inside it. `command eval` rather than `eval`: a
 * syntax or expansion error is then an ordinary failure (status 2) instead of a shell error that would
 * abandon the line, trailer included. Its stdin is /dev/null or its own file, never the control channel.
 */
export function commandScript(options: CommandScriptOptions): Buffer {
  const parts: Buffer[] = [];
  const withStdin = options.stdin !== undefined;
  if (options.reenterCwd === true) parts.push(Buffer.from(REENTER_CWD));
  if (options.stdin !== undefined) parts.push(Buffer.from(`__af_in '${printfFormat(options.stdin)}';`));
  parts.push(Buffer.from(`__af_r ${options.previousStatus};command eval `));
  parts.push(singleQuote(Buffer.concat([options.command, Buffer.from('\n')])));
  parts.push(Buffer.from(withStdin ? ' <"$__af_d/stdin"' : ' </dev/null'));
  parts.push(Buffer.from(` 8>&- 9>&-;__af_t ${options.nonce}${withStdin ? ' x' : ''}\n`));
  return Buffer.concat(parts);
}

/** After an interrupt: prints a trailer for `nonce` once the shell reads input again. */
export function resyncScript(nonce: string): Buffer {
  return Buffer.from(`__af_t ${nonce}\n`);
}

/** Relay control lines (see BOOTSTRAP). */
export const RELAY_INTERRUPT = Buffer.from('!INT\n');
export const RELAY_KILL_OTHERS = Buffer.from('!KILL\n');

/** Frames shell text for the relay: every line gets a leading `.`. `script` must end with a newline. */
export function relayFrame(script: Buffer): Buffer {
  const parts: Buffer[] = [];
  let start = 0;
  while (start < script.length) {
    const end = script.indexOf(0x0a, start);
    const stop = end === -1 ? script.length : end + 1;
    parts.push(Buffer.from('.'), script.subarray(start, stop));
    start = stop;
  }
  if (script.length > 0 && script[script.length - 1] !== 0x0a) parts.push(Buffer.from('\n'));
  return Buffer.concat(parts);
}
