// A full data filesystem (a sandbox's writes, a big upload, anything else on that filesystem): creating
// a codebase, uploading and discarding answered HTTP 500 "internal error (see the server log)", the log
// line about it threw out of the error handler (so discard never answered and the log stopped), and
// destroy failed on its database write. Defence: ENOSPC, EDQUOT and SQLITE_FULL are one error kind,
// AF_NO_SPACE (HTTP 507, gRPC RESOURCE_EXHAUSTED) naming the data directory and what frees room; discard
// and destroy run with the room of a space reserve and never need to write before they remove (a journal
// record waits for the removal); the log drops what it cannot write and says so once it can again.
import { mkdir, readFile } from 'node:fs/promises';
import { statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { describe, expect, it, onTestFinished } from 'vitest';
import { client, expectError, launchServer, scratch, stopAndCheck } from '../helpers/http-fixture.js';
import { codeOf, grpcClient, status } from '../helpers/grpc-client.js';

const MiB = 1024 * 1024;
/** The data directory's filesystem: small, so filling it takes a second. */
const FS_BYTES = 64 * MiB;

/** Bytes root may still write on the filesystem at `dir`. */
async function freeBytes(dir: string): Promise<number> {
  const fs = await statfs(dir);
  return fs.bfree * fs.bsize;
}

/** Waits until `check` holds, for at most `ms` (the trash is emptied in the background). */
async function eventually(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((done) => setTimeout(done, 100));
  }
}

describe('a full data filesystem', () => {
  it('answers 507 and RESOURCE_EXHAUSTED naming the directory; discard and destroy free it', async () => {
    const dir = await scratch('af-full-disk-');
    const fs = join(dir, 'fs');
    await mkdir(fs);
    await execa('mount', ['-t', 'tmpfs', '-o', `size=${FS_BYTES},mode=0700`, 'tmpfs', fs]);
    // Registered before the server's stop, so it runs after it (after-hooks run in reverse).
    onTestFinished(async () => {
      // Lazily if a server that failed to stop still holds it: the mount goes either way.
      if ((await execa('umount', [fs], { reject: false })).exitCode !== 0) await execa('umount', ['-l', fs]);
    });
    const data = join(fs, 'data');
    const served = await launchServer(['--grpc-listen', '127.0.0.1:0'], data);
    onTestFinished(async () => {
      await stopAndCheck(served);
    });
    const api = client(served.url, served.token);
    const target = /grpc:\/\/(\S+) /.exec(served.output())?.[1] as string;
    const grpc = grpcClient(target, served.token);
    onTestFinished(() => grpc.close());

    const cb = ((await api('POST', '/v1/codebases', { name: 'app' })).json as { id: string }).id;
    expect((await api('PUT', `/v1/codebases/${cb}/files/README`, 'hi\n')).status).toBe(200);
    const created = await api('POST', '/v1/sandboxes', {
      codebase_id: cb,
      start: true,
      preset: 'full-access',
    });
    const sandbox = created.json as { id: string; status: string };
    expect(sandbox.status, created.text).toBe('SANDBOX_STATUS_RUNNING');
    const sb = sandbox.id;
    const fill = async (): Promise<void> => {
      const dd = await api('POST', `/v1/sandboxes/${sb}/exec`, {
        command: `dd if=/dev/zero of=/workspace/fill bs=1M count=${FS_BYTES / MiB} 2>&1`,
      });
      expect((dd.json as { stdout: string }).stdout, dd.text).toMatch(/No space left on device/);
      expect(await freeBytes(fs)).toBeLessThan(MiB);
    };
    await fill();

    // Each refusal names the data directory and what to do, with its own kind and status.
    const full = new RegExp(
      `^no space left in the data directory ${data} while .* \\((ENOSPC|SQLITE_FULL)\\): free space on its filesystem, or discard sandbox changes and destroy sandboxes`,
    );
    const create = await api('POST', '/v1/codebases', { name: 'second' });
    expectError(create, 507, 'AF_NO_SPACE', full, status.RESOURCE_EXHAUSTED);
    const info = (create.json as { details: { metadata: Record<string, string> }[] }).details[0];
    expect(info?.metadata['directory']).toBe(data);
    const upload = await api('PUT', `/v1/codebases/${cb}/files/big`, Buffer.alloc(2 * MiB, 1));
    expectError(upload, 507, 'AF_NO_SPACE', full, status.RESOURCE_EXHAUSTED);
    const viaGrpc = grpc.unary('codebase', 'CreateCodebase', { name: 'third', owner_id: 'me' });
    expect(await codeOf(viaGrpc)).toBe(status.RESOURCE_EXHAUSTED);
    await expect(viaGrpc).rejects.toMatchObject({ details: expect.stringMatching(full) as unknown });
    // Nothing of the refused upload is left behind.
    const files = await api('GET', `/v1/codebases/${cb}/files?path=`);
    expect((files.json as { files: { path: string }[] }).files.map((f) => f.path)).toEqual(['README']);

    // Discard works on the full filesystem and gives the room back.
    const discard = await api('POST', `/v1/sandboxes/${sb}/discard`, {});
    expect(discard.status, discard.text).toBe(200);
    expect(await freeBytes(fs)).toBeGreaterThan(FS_BYTES / 2);

    // Then everything works again, over both faces.
    expect((await api('POST', '/v1/codebases', { name: 'second' })).status).toBe(200);
    expect((await api('PUT', `/v1/codebases/${cb}/files/big`, Buffer.alloc(2 * MiB, 1))).status).toBe(200);
    await grpc.unary('codebase', 'CreateCodebase', { name: 'third', owner_id: 'me' });
    const write = await api('POST', `/v1/sandboxes/${sb}/exec`, { command: 'echo ok > /workspace/out' });
    expect((write.json as { exitCode: number }).exitCode, write.text).toBe(0);

    // Destroy works on a full filesystem too.
    await fill();
    const destroy = await api('DELETE', `/v1/sandboxes/${sb}`);
    expect(destroy.status, destroy.text).toBe(200);
    await eventually(async () => (await freeBytes(fs)) > FS_BYTES / 2, 15_000, 'the destroyed delta freed');
    expect((await api('GET', `/v1/sandboxes/${sb}`)).status).toBe(404);

    // The log dropped what it could not write, said so once it could, and serving never stopped.
    const log = await readFile(join(data, 'logs', 'control.log'), 'utf8');
    expect(log).toMatch(/"dropped":\d+,"msg":"\d+ log line\(s\) were dropped here/);
    expect(served.output()).toMatch(/cannot write the log .*control\.log .*ENOSPC/);
    expect((await api('GET', '/v1/codebases')).status).toBe(200);
  });
});
