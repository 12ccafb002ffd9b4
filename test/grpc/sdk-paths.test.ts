// The original's Python SDK paths against a real `agentfense serve`, through a real gRPC client
// built from the .proto files: from_local (CreateCodebase, UploadFiles per file, CreateSandbox,
// StartSandbox), Exec with timeout/stdin/env/workdir, ExecStream, sessions, read/write file (the SDK's
// DownloadFile/UploadFiles), listings, stop/start, destroy, delete codebase.
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-return, @typescript-eslint/no-unsafe-argument --
   gRPC messages are loaded from the .proto at run time (as the SDK's are), so they are untyped here. */
import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { codeOf, status, uploadMessages, type GrpcClient, type Message } from '../helpers/grpc-client.js';
import { startGrpcServer } from '../helpers/grpc-serve.js';

const md5 = (data: Buffer): string => createHash('md5').update(data).digest('hex');
const seconds = (s: number): Message => ({ seconds: s, nanos: 0 });

/** The SDK's Sandbox.from_local: a codebase, one UploadFiles per file, a sandbox with rules, started. */
async function fromLocal(c: GrpcClient, files: Record<string, Buffer>, permissions: Message[]) {
  const codebase = await c.unary('codebase', 'CreateCodebase', { name: 'project', owner_id: 'user_1' });
  for (const [path, content] of Object.entries(files)) {
    const result = await c.upload(uploadMessages(codebase.id, path, content));
    expect(result).toMatchObject({
      codebase_id: codebase.id,
      file_path: path,
      size: content.length,
      checksum: md5(content),
    });
  }
  const created = await c.unary('sandbox', 'CreateSandbox', {
    codebase_id: codebase.id,
    permissions,
    labels: { app: 'test' },
  });
  expect(created.status).toBe('SANDBOX_STATUS_PENDING');
  const started = await c.unary('sandbox', 'StartSandbox', { sandbox_id: created.id });
  expect(started.status).toBe('SANDBOX_STATUS_RUNNING');
  return { codebase, sandbox: started };
}

// The SDK's `agent-safe` preset exactly as it sends it (every rule a glob, priorities as numbers).
const glob = (pattern: string, permission: string, priority: number): Message => ({
  pattern,
  type: 'PATTERN_TYPE_GLOB',
  permission: `PERMISSION_${permission.toUpperCase()}`,
  priority,
});
const RULES = [
  glob('**/*', 'read', 0),
  glob('/output/**', 'write', 10),
  glob('/tmp/**', 'write', 10),
  glob('**/.env*', 'none', 100),
  glob('**/secrets/**', 'none', 100),
  glob('**/*.key', 'none', 100),
  glob('**/*.pem', 'none', 100),
  glob('**/credentials*', 'none', 100),
  glob('**/.git/**', 'none', 50),
];

describe('gRPC sandbox.v1: the SDK main paths', () => {
  it('from_local, exec, streams, sessions, files, stop/start, destroy, delete', async () => {
    const server = await startGrpcServer();
    const c = server.client();
    const big = randomBytes(200 * 1024 + 17);
    const { codebase, sandbox } = await fromLocal(
      c,
      {
        'README.md': Buffer.from('# hello\n'),
        'src/app.py': Buffer.from('print("hi")\n'),
        'secrets/.env': Buffer.from('TOKEN=hunter2\n'),
        'output/.keep': Buffer.alloc(0),
        'data/big.bin': big,
      },
      RULES,
    );
    expect(sandbox.codebase_id).toBe(codebase.id);
    expect(sandbox.labels).toEqual({ app: 'test' });
    expect(sandbox.runtime).toBe('RUNTIME_TYPE_BWRAP');
    expect(sandbox.permissions[4]).toMatchObject({
      pattern: '**/secrets/**',
      type: 'PATTERN_TYPE_GLOB',
      permission: 'PERMISSION_NONE',
      priority: 100,
    });
    const got = await c.unary('codebase', 'GetCodebase', { codebase_id: codebase.id });
    expect(got).toMatchObject({ name: 'project', owner_id: 'user_1', file_count: 5 });

    // Exec with stdin, env, workdir and a timeout that is not reached.
    const ran = await c.unary('sandbox', 'Exec', {
      sandbox_id: sandbox.id,
      command: 'read line; echo "$line $GREETING"; pwd; cat app.py',
      stdin: 'from-stdin\n',
      env: { GREETING: 'from-env' },
      workdir: '/workspace/src',
      timeout: seconds(30),
    });
    expect(ran.stdout).toBe('from-stdin from-env\n/workspace/src\nprint("hi")\n');
    expect(ran.exit_code).toBe(0);
    expect(ran.duration.seconds * 1e9 + ran.duration.nanos).toBeGreaterThan(0);
    // A failing command is a result, not an error; a hidden file is simply not there.
    const hidden = await c.unary('sandbox', 'Exec', {
      sandbox_id: sandbox.id,
      command: 'cat /workspace/secrets/.env; exit 3',
    });
    expect(hidden.exit_code).toBe(3);
    expect(hidden.stdout).toBe('');
    expect(hidden.stderr).toMatch(/No such file or directory/);
    const refused = await c.unary('sandbox', 'Exec', {
      sandbox_id: sandbox.id,
      command: 'echo changed > /workspace/src/app.py',
    });
    expect(refused.exit_code).not.toBe(0);
    expect(refused.stderr).toMatch(/Permission denied|Read-only/);
    // A command that outlives its timeout is DEADLINE_EXCEEDED, as the original answers.
    expect(
      await codeOf(
        c.unary('sandbox', 'Exec', { sandbox_id: sandbox.id, command: 'sleep 30', timeout: seconds(1) }),
      ),
    ).toBe(status.DEADLINE_EXCEEDED);

    // ExecStream: stdout and stderr as typed chunks, the exit code in the trailers.
    const streamed = await c.stream('sandbox', 'ExecStream', {
      sandbox_id: sandbox.id,
      command: 'echo out; echo err >&2; exit 4',
    });
    const text = (type: string): string =>
      Buffer.concat(
        streamed.messages.filter((m: Message) => m.type === type).map((m: Message) => m.data),
      ).toString();
    expect(text('OUTPUT_TYPE_STDOUT')).toBe('out\n');
    expect(text('OUTPUT_TYPE_STDERR')).toBe('err\n');
    expect(streamed.trailers?.get('x-exit-code')).toEqual(['4']);

    // Sessions: state persists between commands; streams; listing; destroy.
    const session = await c.unary('sandbox', 'CreateSession', {
      sandbox_id: sandbox.id,
      env: { WHO: 'agent' },
    });
    expect(session).toMatchObject({
      sandbox_id: sandbox.id,
      status: 'SESSION_STATUS_ACTIVE',
      shell: '/bin/bash',
    });
    await c.unary('sandbox', 'SessionExec', { session_id: session.id, command: 'cd src && export X=42' });
    const state = await c.unary('sandbox', 'SessionExec', {
      session_id: session.id,
      command: 'echo "$PWD $X $WHO"',
    });
    expect(state.stdout).toBe('/workspace/src 42 agent\n');
    const sessionStream = await c.stream('sandbox', 'SessionExecStream', {
      session_id: session.id,
      command: 'echo again $X; echo e >&2',
    });
    expect(
      Buffer.concat(
        sessionStream.messages
          .filter((m: Message) => m.type === 'OUTPUT_TYPE_STDOUT')
          .map((m: Message) => m.data),
      ).toString(),
    ).toBe('again 42\n');
    expect(sessionStream.trailers?.get('x-exit-code')).toEqual(['0']);
    expect(
      await codeOf(
        c.unary('sandbox', 'SessionExec', {
          session_id: session.id,
          command: 'sleep 30',
          timeout: seconds(1),
        }),
      ),
    ).toBe(status.DEADLINE_EXCEEDED);
    // The session survives its command's timeout.
    expect(
      (await c.unary('sandbox', 'SessionExec', { session_id: session.id, command: 'echo $X' })).stdout,
    ).toBe('42\n');
    const listed = await c.unary('sandbox', 'ListSessions', { sandbox_id: sandbox.id });
    expect(listed.sessions.map((s: Message) => s.id)).toEqual([session.id]);
    expect((await c.unary('sandbox', 'GetSession', { session_id: session.id })).status).toBe(
      'SESSION_STATUS_ACTIVE',
    );
    await c.unary('sandbox', 'DestroySession', { session_id: session.id });
    expect((await c.unary('sandbox', 'ListSessions', { sandbox_id: sandbox.id })).sessions).toEqual([]);

    // read_file: DownloadFile in ≤ 64 KiB chunks; write_file: UploadFiles, then seen inside the sandbox.
    const download = await c.stream('codebase', 'DownloadFile', {
      codebase_id: codebase.id,
      file_path: 'data/big.bin',
    });
    expect(download.messages.every((m: Message) => m.data.length <= 64 * 1024)).toBe(true);
    expect(md5(Buffer.concat(download.messages.map((m: Message) => m.data)))).toBe(md5(big));
    const note = Buffer.from('written through the SDK path\n');
    expect((await c.upload(uploadMessages(codebase.id, '/workspace/notes.txt', note))).checksum).toBe(
      md5(note),
    );
    expect(
      (await c.unary('sandbox', 'Exec', { sandbox_id: sandbox.id, command: 'cat /workspace/notes.txt' }))
        .stdout,
    ).toBe(note.toString());

    // list_files: relative paths, names, directories, recursive.
    const root = await c.unary('codebase', 'ListFiles', { codebase_id: codebase.id, path: '' });
    expect(root.files.map((f: Message) => f.path).sort()).toEqual([
      'README.md',
      'data',
      'notes.txt',
      'output',
      'secrets',
      'src',
    ]);
    expect(root.files.find((f: Message) => f.path === 'src')).toMatchObject({ name: 'src', is_dir: true });
    const deep = await c.unary('codebase', 'ListFiles', {
      codebase_id: codebase.id,
      path: 'src',
      recursive: true,
    });
    expect(deep.files.map((f: Message) => [f.path, f.name, f.size])).toEqual([['src/app.py', 'app.py', 12]]);

    // Writes in a write area land in the sandbox's delta, readable through Exec.
    await c.unary('sandbox', 'Exec', {
      sandbox_id: sandbox.id,
      command: 'echo result > /workspace/output/r.txt',
    });
    expect(
      (await c.unary('sandbox', 'Exec', { sandbox_id: sandbox.id, command: 'cat /workspace/output/r.txt' }))
        .stdout,
    ).toBe('result\n');

    // stop/start; repeated ones are FAILED_PRECONDITION, as is exec in a stopped sandbox.
    expect((await c.unary('sandbox', 'StopSandbox', { sandbox_id: sandbox.id })).status).toBe(
      'SANDBOX_STATUS_STOPPED',
    );
    expect(await codeOf(c.unary('sandbox', 'StopSandbox', { sandbox_id: sandbox.id }))).toBe(
      status.FAILED_PRECONDITION,
    );
    expect(await codeOf(c.unary('sandbox', 'Exec', { sandbox_id: sandbox.id, command: 'true' }))).toBe(
      status.FAILED_PRECONDITION,
    );
    const restarted = await c.unary('sandbox', 'StartSandbox', { sandbox_id: sandbox.id });
    expect(restarted.status).toBe('SANDBOX_STATUS_RUNNING');
    expect(restarted.started_at).not.toBeNull();
    expect(await codeOf(c.unary('sandbox', 'StartSandbox', { sandbox_id: sandbox.id }))).toBe(
      status.FAILED_PRECONDITION,
    );
    expect(
      (await c.unary('sandbox', 'Exec', { sandbox_id: sandbox.id, command: 'cat /workspace/output/r.txt' }))
        .stdout,
    ).toBe('result\n');

    const all = await c.unary('sandbox', 'ListSandboxes', { codebase_id: codebase.id });
    expect(all.sandboxes.map((s: Message) => s.id)).toEqual([sandbox.id]);
    // A filter naming a codebase in the original's id format matches nothing, as there.
    const none = await c.unary('sandbox', 'ListSandboxes', { codebase_id: 'cb_0123456789abcdef' });
    expect(none.sandboxes).toEqual([]);
    await c.unary('sandbox', 'DestroySandbox', { sandbox_id: sandbox.id });
    expect(await codeOf(c.unary('sandbox', 'GetSandbox', { sandbox_id: sandbox.id }))).toBe(status.NOT_FOUND);
    await c.unary('codebase', 'DeleteCodebase', { codebase_id: codebase.id });
    expect(await codeOf(c.unary('codebase', 'GetCodebase', { codebase_id: codebase.id }))).toBe(
      status.NOT_FOUND,
    );
    expect((await c.unary('codebase', 'ListCodebases', {})).codebases).toEqual([]);
  });
});
