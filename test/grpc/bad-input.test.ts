// Bad input on the gRPC face gets the code the original's SDK expects and changes nothing;
// ids in the original's format (a migrated client's stale id) or any other that is not ours are NOT_FOUND,
// as the original answers, not INVALID_ARGUMENT.
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-argument --
   gRPC messages are loaded from the .proto at run time (as the SDK's are), so they are untyped here. */
import { describe, expect, it } from 'vitest';
import { codeOf, status, uploadMessages, type GrpcClient } from '../helpers/grpc-client.js';
import { startGrpcServer } from '../helpers/grpc-serve.js';

/** Everything a client can list: what must not change after a refused call. */
async function snapshot(c: GrpcClient, codebaseId: string, sandboxId: string) {
  return {
    codebases: (await c.unary('codebase', 'ListCodebases', {})).codebases.map((x: { id: string }) => x.id),
    files: (await c.unary('codebase', 'ListFiles', { codebase_id: codebaseId, recursive: true })).files.map(
      (f: { path: string; size: number }) => `${f.path}:${f.size}`,
    ),
    sandboxes: (await c.unary('sandbox', 'ListSandboxes', {})).sandboxes.map(
      (s: { id: string; status: string }) => `${s.id}:${s.status}`,
    ),
    sessions: (await c.unary('sandbox', 'ListSessions', { sandbox_id: sandboxId })).sessions.length,
  };
}

describe('gRPC sandbox.v1: bad input', () => {
  it('answers INVALID_ARGUMENT / NOT_FOUND / FAILED_PRECONDITION and changes nothing', async () => {
    const server = await startGrpcServer();
    const c = server.client();
    const codebase = await c.unary('codebase', 'CreateCodebase', { name: 'p', owner_id: 'u' });
    await c.upload(uploadMessages(codebase.id, 'a.txt', Buffer.from('original\n')));
    const sandbox = await c.unary('sandbox', 'CreateSandbox', {
      codebase_id: codebase.id,
      permissions: [{ pattern: '**', permission: 'PERMISSION_WRITE' }],
    });
    const before = await snapshot(c, codebase.id, sandbox.id);
    expect(before.files).toEqual(['a.txt:9']);

    const cases: [string, () => Promise<unknown>, number][] = [
      // Ids: any id that is not ours (the original's format included) is unknown here; empty is "required".
      [
        'GetSandbox original-format id',
        () => c.unary('sandbox', 'GetSandbox', { sandbox_id: 'sb_0123456789abcdef' }),
        status.NOT_FOUND,
      ],
      [
        'StartSandbox original-format id',
        () => c.unary('sandbox', 'StartSandbox', { sandbox_id: 'sb_0123456789abcdef' }),
        status.NOT_FOUND,
      ],
      [
        'DestroySandbox original-format id',
        () => c.unary('sandbox', 'DestroySandbox', { sandbox_id: 'sb_0123456789abcdef' }),
        status.NOT_FOUND,
      ],
      [
        'Exec original-format id',
        () => c.unary('sandbox', 'Exec', { sandbox_id: 'sb_0123456789abcdef', command: 'true' }),
        status.NOT_FOUND,
      ],
      [
        'GetCodebase original-format id',
        () => c.unary('codebase', 'GetCodebase', { codebase_id: 'cb_0123456789abcdef' }),
        status.NOT_FOUND,
      ],
      [
        'GetSession original-format id',
        () => c.unary('sandbox', 'GetSession', { session_id: 'sess_0123456789abcdef' }),
        status.NOT_FOUND,
      ],
      [
        'GetSandbox of a well-formed unknown id',
        () => c.unary('sandbox', 'GetSandbox', { sandbox_id: 'sb_00000000-0000-4000-8000-000000000000' }),
        status.NOT_FOUND,
      ],
      [
        'GetSandbox empty id',
        () => c.unary('sandbox', 'GetSandbox', { sandbox_id: '' }),
        status.INVALID_ARGUMENT,
      ],
      [
        "GetSandbox id that is nobody's format",
        () => c.unary('sandbox', 'GetSandbox', { sandbox_id: '../../etc' }),
        status.NOT_FOUND,
      ],
      // Requests missing what they need, or carrying values that mean nothing.
      [
        'CreateCodebase without a name',
        () => c.unary('codebase', 'CreateCodebase', { name: '', owner_id: 'u' }),
        status.INVALID_ARGUMENT,
      ],
      [
        'CreateSandbox on an unknown codebase',
        () => c.unary('sandbox', 'CreateSandbox', { codebase_id: 'cb_0123456789abcdef' }),
        status.NOT_FOUND,
      ],
      [
        'CreateSandbox with an unspecified permission',
        () =>
          c.unary('sandbox', 'CreateSandbox', { codebase_id: codebase.id, permissions: [{ pattern: '**' }] }),
        status.INVALID_ARGUMENT,
      ],
      [
        'CreateSandbox with a bad pattern',
        () =>
          c.unary('sandbox', 'CreateSandbox', {
            codebase_id: codebase.id,
            permissions: [{ pattern: '', permission: 'PERMISSION_READ' }],
          }),
        status.INVALID_ARGUMENT,
      ],
      [
        'CreateSandbox with negative resources',
        () =>
          c.unary('sandbox', 'CreateSandbox', { codebase_id: codebase.id, resources: { memory_bytes: -1 } }),
        status.INVALID_ARGUMENT,
      ],
      [
        'Exec without a command',
        () => c.unary('sandbox', 'Exec', { sandbox_id: sandbox.id, command: '' }),
        status.INVALID_ARGUMENT,
      ],
      [
        'Exec in a sandbox not started',
        () => c.unary('sandbox', 'Exec', { sandbox_id: sandbox.id, command: 'true' }),
        status.FAILED_PRECONDITION,
      ],
      [
        'StopSandbox of a sandbox not started',
        () => c.unary('sandbox', 'StopSandbox', { sandbox_id: sandbox.id }),
        status.FAILED_PRECONDITION,
      ],
      [
        'CreateSession in a sandbox not started',
        () => c.unary('sandbox', 'CreateSession', { sandbox_id: sandbox.id }),
        status.FAILED_PRECONDITION,
      ],
      [
        'CreateSession with an unknown shell',
        () => c.unary('sandbox', 'CreateSession', { sandbox_id: sandbox.id, shell: '/bin/zsh' }),
        status.INVALID_ARGUMENT,
      ],
      [
        'ExecStream without a command',
        () => c.stream('sandbox', 'ExecStream', { sandbox_id: sandbox.id, command: '' }),
        status.INVALID_ARGUMENT,
      ],
      // Files: traversal, missing, and uploads out of order or short.
      [
        'DownloadFile of a missing file',
        () => c.stream('codebase', 'DownloadFile', { codebase_id: codebase.id, file_path: 'nope.txt' }),
        status.NOT_FOUND,
      ],
      [
        'DownloadFile with ..',
        () => c.stream('codebase', 'DownloadFile', { codebase_id: codebase.id, file_path: '../etc/passwd' }),
        status.INVALID_ARGUMENT,
      ],
      [
        'ListFiles with ..',
        () => c.unary('codebase', 'ListFiles', { codebase_id: codebase.id, path: '..' }),
        status.INVALID_ARGUMENT,
      ],
      [
        'UploadFiles data before metadata',
        () =>
          c.upload([
            { data: Buffer.from('x') },
            { metadata: { codebase_id: codebase.id, file_path: 'a.txt' } },
          ]),
        status.INVALID_ARGUMENT,
      ],
      ['UploadFiles with no message', () => c.upload([]), status.INVALID_ARGUMENT],
      [
        'UploadFiles twice the metadata',
        () =>
          c.upload([
            { metadata: { codebase_id: codebase.id, file_path: 'a.txt' } },
            { data: Buffer.from('new') },
            { metadata: { codebase_id: codebase.id, file_path: 'b.txt' } },
          ]),
        status.INVALID_ARGUMENT,
      ],
      [
        'UploadFiles shorter than total_size',
        () =>
          c.upload([
            { metadata: { codebase_id: codebase.id, file_path: 'a.txt', total_size: 100 } },
            { data: Buffer.from('short') },
          ]),
        status.INVALID_ARGUMENT,
      ],
      [
        'UploadFiles with ..',
        () => c.upload(uploadMessages(codebase.id, '../escape.txt', Buffer.from('x'))),
        status.INVALID_ARGUMENT,
      ],
      [
        'UploadFiles to an unknown codebase',
        () => c.upload(uploadMessages('cb_0123456789abcdef', 'a.txt', Buffer.from('x'))),
        status.NOT_FOUND,
      ],
    ];
    for (const [what, call, code] of cases) {
      expect(`${what}: ${status[await codeOf(call())]}`).toBe(`${what}: ${status[code]}`);
    }
    // A rejection carries a message naming what is wrong, and our own code in the trailers.
    const err = await c.unary('sandbox', 'GetSandbox', { sandbox_id: '' }).catch((e: unknown) => e);
    expect(err.details).toMatch(/sandbox_id is required/);
    expect(err.metadata.get('x-agentfense-code')).toEqual(['AF_INVALID_ARGUMENT']);

    expect(await snapshot(c, codebase.id, sandbox.id)).toEqual(before);
    const content = await c.stream('codebase', 'DownloadFile', {
      codebase_id: codebase.id,
      file_path: 'a.txt',
    });
    expect(Buffer.concat(content.messages.map((m: { data: Buffer }) => m.data)).toString()).toBe(
      'original\n',
    );
  });
});
