// The baseline of `pnpm bench:cli`: a bare bwrap wrapper equivalent to sandbox-runtime's (`srt`, a Node
// program around bwrap): network and filesystem unshared (read-only host root, the directory bound
// writable, fresh /dev and /proc, new pid namespace, new session, dies with its parent), the command's
// status passed through. Usage: node bwrap-wrapper.js DIR COMMAND [ARGS...]
import { spawn } from 'node:child_process';
import process from 'node:process';

const [dir, ...command] = process.argv.slice(2);
const child = spawn(
  'bwrap',
  [
    '--new-session',
    '--die-with-parent',
    '--unshare-net',
    '--unshare-pid',
    '--ro-bind',
    '/',
    '/',
    '--bind',
    dir,
    dir,
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--chdir',
    dir,
    '--',
    ...command,
  ],
  { stdio: 'inherit' },
);
child.once('exit', (code, signal) => {
  process.exitCode = code ?? 128 + (signal === null ? 0 : 9);
});
