// Sessions from the command line: `agentfense shell <dir>` (a local sandbox, commands from stdin) and the
// `session` commands plus `shell <sandbox>` against a real `agentfense serve` on loopback.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import type { ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
const demo = `${root}examples/demo-repo`;

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-cli-sessions-'));
});
afterAll(async () => {
  const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
  await rm(scratch, { recursive: true, force: true });
  expect(left).toEqual([]);
});

// The session commands find the server's token in this data directory (the one `serve` below uses).
const agentfense = (args: string[], input?: string) =>
  execa(process.execPath, [bin, ...args], {
    reject: false,
    stripFinalNewline: false,
    env: { AGENTFENSE_DATA_DIR: join(scratch, 'served') },
    ...(input === undefined ? {} : { input }),
  });

describe('agentfense shell <dir>', () => {
  it('keeps cd, export and functions across lines and exits with the shell status', async () => {
    const script = [
      'cd /workspace/src',
      'pwd',
      'export A=1',
      'f() { echo "fn $A"; }',
      'f',
      'ls /workspace/secrets',
      'exit 3',
      'echo never',
    ].join('\n');
    const r = await agentfense(['shell', demo, '--data', join(scratch, 'local')], `${script}\n`);
    expect(r.stdout).toBe('/workspace/src\nfn 1\n');
    expect(r.stderr).toContain("ls: cannot access '/workspace/secrets': No such file or directory");
    expect(r.exitCode).toBe(3);
  });

  it('refuses a target that is neither a directory nor a sandbox id', async () => {
    const r = await agentfense(['shell', join(scratch, 'missing')]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('is neither a directory nor a sandbox id');
  });
});

describe('agentfense session (through agentfense serve)', () => {
  let server: ResultPromise<{ reject: false }>;
  let url: string;
  let sandbox: string;

  beforeAll(async () => {
    server = execa(
      process.execPath,
      [bin, 'serve', '--listen', '127.0.0.1:0', '--grpc-listen', '', '--data', join(scratch, 'served')],
      {
        reject: false,
      },
    );
    url = await new Promise<string>((resolve, reject) => {
      let seen = '';
      server.stderr.on('data', (chunk: Buffer) => {
        seen += chunk.toString();
        const match = /serving (http:\/\/\S+) /.exec(seen);
        if (match?.[1] !== undefined) resolve(match[1]);
      });
      void server.then((r) => reject(new Error(`serve exited: ${String(r.stderr)}`)));
    });
    const authorization = `Bearer ${(await readFile(join(scratch, 'served', 'api-token'), 'utf8')).trim()}`;
    const call = async (method: string, path: string, body?: unknown): Promise<Record<string, unknown>> => {
      const response = await fetch(`${url}${path}`, {
        method,
        headers: {
          authorization,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const json = (await response.json()) as Record<string, unknown>;
      if (!response.ok) throw new Error(`${method} ${path}: ${JSON.stringify(json)}`);
      return json;
    };
    const codebase = await call('POST', '/v1/codebases', { name: 'sessions-test', owner_id: 'test' });
    await fetch(`${url}/v1/codebases/${String(codebase.id)}/files/src/a.txt`, {
      method: 'PUT',
      headers: { authorization },
      body: 'hello\n',
    });
    const created = await call('POST', '/v1/sandboxes', { codebase_id: codebase.id, preset: 'agent-safe' });
    sandbox = String(created.id);
    await call('POST', `/v1/sandboxes/${sandbox}/start`);
  });

  afterAll(async () => {
    server.kill('SIGTERM');
    const r = await server;
    expect(r.stderr).toContain('agentfense: stopped');
  });

  it('creates a session, keeps its state across execs, lists and closes it', async () => {
    const created = await agentfense(['session', 'create', sandbox, '--server', url, '--env', 'WHO=agent']);
    expect(created.exitCode).toBe(0);
    const session = created.stdout.trim();
    expect(session).toMatch(/^ses_/);

    expect(
      (await agentfense(['session', 'exec', session, '--server', url, '--', 'cd src && export X=42']))
        .exitCode,
    ).toBe(0);
    const r = await agentfense([
      'session',
      'exec',
      session,
      '--server',
      url,
      '--',
      'echo "$WHO $X $(pwd)"; cat a.txt; exit_code_test() { return 5; }; exit_code_test',
    ]);
    expect(r.stdout).toBe('agent 42 /workspace/src\nhello\n');
    expect(r.exitCode).toBe(5);

    const timedOut = await agentfense([
      'session',
      'exec',
      session,
      '--server',
      url,
      '--timeout',
      '1',
      '--',
      'sleep 30',
    ]);
    expect(timedOut.exitCode).toBe(124);
    const after = await agentfense(['session', 'exec', session, '--server', url, '--', 'echo $X']);
    expect(after.stdout).toBe('42\n');

    const list = await agentfense(['session', 'list', sandbox, '--server', url, '--json']);
    expect(JSON.parse(list.stdout)).toContainEqual(
      expect.objectContaining({ id: session, sandboxId: sandbox }),
    );
    expect((await agentfense(['session', 'close', session, '--server', url])).exitCode).toBe(0);
    const closed = await agentfense(['session', 'exec', session, '--server', url, '--', 'true']);
    expect(closed.exitCode).not.toBe(0);
    expect(closed.stderr).toContain(session);
  });

  it('agentfense shell <sandbox> runs a session for the lines on stdin', async () => {
    const r = await agentfense(['shell', sandbox, '--server', url], 'cd /workspace/src\nls\n');
    expect(r.stdout).toBe('a.txt\n');
    expect(r.exitCode).toBe(0);
  });

  it('sends no token when the data directory has none: the server refuses', async () => {
    const r = await execa(process.execPath, [bin, 'session', 'list', sandbox, '--server', url], {
      reject: false,
      env: { AGENTFENSE_DATA_DIR: join(scratch, 'other') },
    });
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain('missing or invalid bearer token');
  });

  it('says how to fix an unreachable server', async () => {
    const r = await agentfense(['session', 'list', sandbox, '--server', 'http://127.0.0.1:9']);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain(
      'cannot reach the agentfense server at http://127.0.0.1:9 (start one with `agentfense serve`',
    );
  });
});
