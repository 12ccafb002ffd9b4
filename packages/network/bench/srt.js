// The peer: srt (`@anthropic-ai/sandbox-runtime`), whose sandbox has no network of its own and reaches
// out only through srt's HTTP proxy on the host (socat relays inside and outside the sandbox, a Node
// proxy deciding by name). Installed at the first run into the bench cache, not into the workspace, so
// neither users nor CI's test command carry it; it needs bubblewrap, ripgrep and socat (scripts/setup).
// srt resolves names with the host's resolver, so `bench.test` goes into /etc/hosts for the step, on a
// line of its own marked with this process's id, removed again by `removeHostsEntry` (also on failure).
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import process from 'node:process';
import { promisify } from 'node:util';

const run = promisify(execFile);
export const SRT_PACKAGE = '@anthropic-ai/sandbox-runtime@0.0.83';
const CACHE_DIR = process.env.BENCH_CACHE ?? '/var/tmp/agentfense-bench-cache';
const PREFIX = join(CACHE_DIR, 'srt-0.0.83');
const SRT = join(PREFIX, 'node_modules', '.bin', 'srt');
const HOSTS = '/etc/hosts';
const MARK = `# agentfense bench:network ${process.pid}`;

/** Installs srt if the cache lacks it; resolves to null, or to why srt cannot run here. */
export async function prepareSrt() {
  for (const [tool, args] of [
    ['bwrap', ['--version']],
    ['rg', ['--version']],
    ['socat', ['-V']],
  ]) {
    try {
      await run(tool, args);
    } catch {
      return `srt needs ${tool} (bash scripts/setup installs it)`;
    }
  }
  if (existsSync(SRT)) return null;
  await mkdir(PREFIX, { recursive: true });
  try {
    await run('npm', ['install', '--prefix', PREFIX, '--no-audit', '--no-fund', '--silent', SRT_PACKAGE], {
      timeout: 300_000,
    });
  } catch (err) {
    return `npm install ${SRT_PACKAGE} failed: ${
      String(err.stderr || err.message)
        .trim()
        .split('\n')[0]
    }`;
  }
  return null;
}

export async function addHostsEntry(address, name) {
  const text = await readFile(HOSTS, 'utf8');
  await writeFile(
    HOSTS,
    `${text.endsWith('\n') || text === '' ? text : `${text}\n`}${address} ${name} ${MARK}\n`,
  );
}

export async function removeHostsEntry() {
  const text = await readFile(HOSTS, 'utf8').catch(() => undefined);
  if (text === undefined || !text.includes(MARK)) return;
  await writeFile(
    HOSTS,
    text
      .split('\n')
      .filter((line) => !line.endsWith(MARK))
      .join('\n'),
  );
}

/** srt's settings: only `name` reachable, the filesystem as srt leaves it by default. */
export async function writeSrtSettings(dir, name) {
  const file = join(dir, 'srt-settings.json');
  await writeFile(
    file,
    JSON.stringify({
      network: { allowedDomains: [name], deniedDomains: [] },
      filesystem: { denyRead: [], allowWrite: [dir], denyWrite: [] },
    }),
  );
  return file;
}

/** Runs `argv` inside srt; its stdout. */
export async function srtRun(settings, argv, cwd, signal) {
  const { stdout } = await run(SRT, ['--settings', settings, '--', ...argv], {
    cwd,
    signal,
    timeout: 600_000,
    env: { PATH: process.env.PATH, HOME: process.env.HOME ?? '/root' },
  });
  return stdout;
}
