// An interactive CLI (`agentfense shell`) on a pseudo-terminal (script(1)), fed lines on its stdin. The
// pipe into script stays open until the program has exited: at EOF script would kill the program.
import { execa } from 'execa';

/** Runs `argv` on a pty with `lines` typed in; resolves with what the pty showed and the exit status. */
export async function shellOnTerminal(
  argv: readonly string[],
  lines: readonly string[],
): Promise<{ exitCode: number | undefined; stdout: string }> {
  const command = argv.map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(' ');
  const child = execa('script', ['-qec', command, '/dev/null'], { reject: false, stdin: 'pipe' });
  child.stdin.write(lines.map((l) => `${l}\n`).join(''));
  const r = await child;
  return { exitCode: r.exitCode, stdout: r.stdout };
}
