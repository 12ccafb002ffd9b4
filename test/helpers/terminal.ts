// Running a program with a pseudo-terminal as its stdout and stderr (script(1)), for the attack tests that
// check what reaches an operator's terminal. argv is quoted for script's `sh -c`, never interpolated.
import { execa } from 'execa';

/** Runs `argv` (with `env` added) on a pty; resolves with what the pty showed and the exit status. */
export async function onTerminal(
  argv: readonly string[],
  env: Readonly<Record<string, string>> = {},
): Promise<{ exitCode: number | undefined; stdout: string }> {
  const command = ['env', ...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...argv]
    .map((a) => `'${a.replaceAll("'", `'\\''`)}'`)
    .join(' ');
  const r = await execa('script', ['-qec', command, '/dev/null'], { reject: false });
  return { exitCode: r.exitCode, stdout: r.stdout };
}
