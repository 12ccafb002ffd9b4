// Processes on the host for the workloads bench: argv arrays only (never a shell string built from
// paths; the workload scripts are constants and read their paths from the environment).
import { execFile, spawn } from 'node:child_process';
import { readFile, readdir } from 'node:fs/promises';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** Runs `argv` and resolves with its stdout; rejects with its stderr in the message when it fails. */
export async function run(argv, options = {}) {
  try {
    const { stdout } = await execFileAsync(argv[0], argv.slice(1), { maxBuffer: 64 << 20, ...options });
    return stdout;
  } catch (err) {
    const stderr = typeof err.stderr === 'string' ? err.stderr.trim().slice(-2000) : '';
    throw new Error(`${argv.join(' ')} failed (${err.code ?? err.signal}): ${stderr || err.message}`, {
      cause: err,
    });
  }
}

/**
 * Runs `bash -c script` in `cwd` with exactly `env`; resolves with the exit code and output whatever the
 * status (a workload's failure is reported, not thrown). Killed after `timeoutMs`.
 */
export function bash({ script, cwd, env, timeoutMs }) {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    const err = [];
    child.stdout.on('data', (chunk) => out.push(chunk));
    child.stderr.on('data', (chunk) => err.push(chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({
        exitCode: code,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      });
    });
  });
}

/**
 * CPU time (ms) every thread of process `pid` has run, from the scheduler's nanosecond counters
 * (/proc/<pid>/task/<tid>/schedstat): exact where utime/stime tick at 10 ms.
 */
export async function processCpuMs(pid) {
  let ns = 0;
  for (const tid of await readdir(`/proc/${pid}/task`).catch(() => [])) {
    const text = await readFile(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').catch(() => '0');
    ns += Number(text.split(' ')[0]);
  }
  return ns / 1e6;
}

/** The pid of the process whose command line holds every one of `words` (undefined if none). */
export async function findProcess(words) {
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const argv = (await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (words.every((w) => argv.includes(w) || argv.some((a) => a.includes(w)))) return Number(name);
  }
  return undefined;
}
