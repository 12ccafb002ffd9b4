// A descriptor the process embedding the library inherits without close-on-exec (a parent that leaked a
// pipe or a socket to it) used to pass into every sandboxed command: neither libuv nor bwrap closes
// descriptors above the stdio it is given, so an agent could write into whatever the host's pipe led to.
// (The `agentfense` executable closes such descriptors at start-up; a library user's process is its own,
// so the runtime cannot close them.) Now each bwrap spawn covers those positions with /dev/null
// (runtime-bwrap/src/exec/inherited-fds.ts).
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';

const root = fileURLToPath(new URL('../..', import.meta.url));
/** Where the host's pipe sits in the library user's process: high enough that Node leaves it as inherited. */
const LEAKED_FD = 40;

let scratch: string;
let repo: string;
let data: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-sec-fds-'));
  repo = join(scratch, 'repo');
  data = join(scratch, 'data');
  await mkdir(repo);
  await writeFile(join(repo, 'README.md'), 'hi\n');
});

afterAll(async () => {
  const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
  await rm(scratch, { recursive: true, force: true });
  expect(left).toEqual([]);
});

/** What a library user's program prints: the fd's target from a command and from a session's command. */
const program = `
import { Sandbox } from '@agentfense/control';
const probe = 'readlink /proc/self/fd/${LEAKED_FD} || echo absent; echo escaped 2>/dev/null >/proc/self/fd/${LEAKED_FD}; true';
const sb = await Sandbox.fromLocal(process.argv[1], { preset: 'agent-safe' });
try {
  const command = (await sb.run(probe)).stdout.trim();
  const shell = await sb.session({ shell: '/bin/sh' });
  const session = (await shell.run(probe)).stdout.trim();
  await shell.close();
  console.log(JSON.stringify({ command, session }));
} finally {
  await sb.destroy();
}
`;

describe('a descriptor leaked to the process that embeds the library', () => {
  it('reaches neither a command nor a session: its position holds /dev/null, and nothing arrives at the host pipe', async () => {
    const stdio: ('ignore' | 'pipe')[] = ['ignore', 'pipe', 'pipe'];
    for (let fd = 3; fd < LEAKED_FD; fd++) stdio.push('ignore');
    stdio.push('pipe'); // the leaked pipe: its read end stays here, in the test
    const child = spawn(process.execPath, ['--input-type=module', '-e', program, repo], {
      cwd: root,
      stdio,
      env: { ...process.env, AGENTFENSE_DATA_DIR: data },
    });
    const leaked = (child.stdio as readonly unknown[])[LEAKED_FD] as Readable;
    let arrived = '';
    leaked.on('data', (chunk: Buffer) => (arrived += chunk.toString()));
    let out = '';
    let err = '';
    child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const status = await new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    expect(err).toBe('');
    expect(status).toBe(0);
    const seen = JSON.parse(out) as { command: string; session: string };
    expect(seen.command).toMatch(/^(\/dev\/null|absent)$/);
    expect(seen.session).toMatch(/^(\/dev\/null|absent)$/);
    expect(arrived).toBe('');
  }, 60_000);
});
