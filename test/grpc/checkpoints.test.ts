// Checkpoints and forks on the API faces, against a real `agentfense serve`: taken over gRPC and listed
// over HTTP (and the other way round), restored over either with the files back at once, forked into
// running sandboxes over either, deleted; an unknown checkpoint is NOT_FOUND on both, a bad count
// INVALID_ARGUMENT with the same message.
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-argument --
   gRPC messages are loaded from the .proto at run time (as the SDK's are), so they are untyped here. */
import { describe, expect, it } from 'vitest';
import { client as httpClient } from '../helpers/http-fixture.js';
import { codeOf, status, uploadMessages } from '../helpers/grpc-client.js';
import { startGrpcServer } from '../helpers/grpc-serve.js';

const WRITE_ALL = [{ pattern: '**', permission: 'PERMISSION_WRITE' }];
const UNKNOWN_CHECKPOINT = 'cp_00000000-0000-4000-8000-000000000000';

describe('gRPC and HTTP: checkpoints and forks', () => {
  it('take, list, restore, fork and delete on both faces', async () => {
    const server = await startGrpcServer();
    const c = server.client();
    const http = httpClient(server.served.url, server.served.token);
    const { id: codebaseId } = await c.unary('codebase', 'CreateCodebase', { name: 'cp', owner_id: 'u' });
    await c.upload(uploadMessages(codebaseId, 'a.txt', Buffer.from('codebase\n')));
    const sandbox = await c.unary('sandbox', 'CreateSandbox', {
      codebase_id: codebaseId,
      permissions: WRITE_ALL,
    });
    await c.unary('sandbox', 'StartSandbox', { sandbox_id: sandbox.id });
    const exec = async (id: string, command: string): Promise<string> =>
      String((await c.unary('sandbox', 'Exec', { sandbox_id: id, command })).stdout);

    await exec(sandbox.id, 'echo one > /workspace/a.txt');
    const first = await c.unary('sandbox', 'CreateCheckpoint', {
      sandbox_id: sandbox.id,
      name: 'one',
      message: 'a.txt says one',
    });
    expect(first).toMatchObject({ sandbox_id: sandbox.id, name: 'one', message: 'a.txt says one', depth: 1 });
    expect(first.id).toMatch(/^cp_/);
    await exec(sandbox.id, 'echo two > /workspace/a.txt');
    const second = await http('POST', `/v1/sandboxes/${sandbox.id}/checkpoints`, { name: 'two' });
    expect(second.status, second.text).toBe(200);
    expect(second.json).toMatchObject({ sandboxId: sandbox.id, name: 'two', message: null, depth: 2 });

    const listed = await http('GET', `/v1/sandboxes/${sandbox.id}/checkpoints`);
    expect(listed.json.checkpoints.map((x: { id: string }) => x.id)).toEqual([first.id, second.json.id]);
    const viaGrpc = await c.unary('sandbox', 'ListCheckpoints', { sandbox_id: sandbox.id });
    expect(viaGrpc.checkpoints.map((x: { name: string }) => x.name)).toEqual(['one', 'two']);

    await exec(sandbox.id, 'echo three > /workspace/a.txt');
    const restored = await http('POST', `/v1/sandboxes/${sandbox.id}/checkpoints/${first.id}/restore`, {
      keep_current: true,
    });
    expect(restored.status, restored.text).toBe(200);
    expect(await exec(sandbox.id, 'cat /workspace/a.txt')).toBe('one\n');
    const kept = restored.json.kept.id as string;
    await c.unary('sandbox', 'RestoreCheckpoint', { sandbox_id: sandbox.id, checkpoint_id: kept });
    expect(await exec(sandbox.id, 'cat /workspace/a.txt')).toBe('three\n');

    const forked = await c.unary('sandbox', 'ForkSandbox', {
      sandbox_id: sandbox.id,
      checkpoint_id: second.json.id,
      count: 2,
    });
    expect(forked.sandboxes.map((s: { status: string }) => s.status)).toEqual([
      'SANDBOX_STATUS_RUNNING',
      'SANDBOX_STATUS_RUNNING',
    ]);
    for (const fork of forked.sandboxes) expect(await exec(fork.id, 'cat /workspace/a.txt')).toBe('two\n');
    const overHttp = await http('POST', `/v1/sandboxes/${sandbox.id}/fork`, { no_start: true });
    expect(overHttp.status, overHttp.text).toBe(200);
    expect(overHttp.json.sandboxes).toHaveLength(1);
    expect(overHttp.json.sandboxes[0].status).toBe('SANDBOX_STATUS_PENDING');

    await c.unary('sandbox', 'DeleteCheckpoint', { sandbox_id: sandbox.id, checkpoint_id: first.id });
    const deleted = await http('DELETE', `/v1/sandboxes/${sandbox.id}/checkpoints/${second.json.id}`);
    expect(deleted.status).toBe(200);
    const left = await c.unary('sandbox', 'ListCheckpoints', { sandbox_id: sandbox.id });
    expect(left.checkpoints.map((x: { id: string }) => x.id)).not.toContain(first.id);

    // Errors say what is wrong, the same on both faces.
    expect(
      await codeOf(
        c.unary('sandbox', 'RestoreCheckpoint', {
          sandbox_id: sandbox.id,
          checkpoint_id: UNKNOWN_CHECKPOINT,
        }),
      ),
    ).toBe(status.NOT_FOUND);
    const missing = await http(
      'POST',
      `/v1/sandboxes/${sandbox.id}/checkpoints/${UNKNOWN_CHECKPOINT}/restore`,
    );
    expect(missing.status).toBe(404);
    const tooMany = await http('POST', `/v1/sandboxes/${sandbox.id}/fork`, { count: 33 });
    expect(tooMany.status).toBe(400);
    const grpcTooMany = c.unary('sandbox', 'ForkSandbox', { sandbox_id: sandbox.id, count: 33 });
    await expect(grpcTooMany).rejects.toMatchObject({ code: status.INVALID_ARGUMENT });
    await expect(grpcTooMany).rejects.toThrow(/fork count must be an integer from 1 to 32/);
  });
});
