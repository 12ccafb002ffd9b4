// Stored codebases (contract §6): streamed uploads with path validation and no symlink following, listings,
// downloads, metadata, deletion refused while in use, and persistence across a control-plane restart.
import { mkdir, readFile, readdir, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { InvalidArgumentError, NotFoundError, WrongStateError } from '@agentfense/protocol';
import { assertCleanAndRemove, makeDirs } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

describe('stored codebases', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;

  beforeAll(async () => {
    dirs = await makeDirs({});
    cp = await ControlPlane.open({ dataDir: dirs.dataDir, maxUploadBytes: 1024 * 1024 });
  });
  afterAll(async () => {
    await cp?.close();
    await assertCleanAndRemove(dirs);
  });

  it('uploads bytes and streams, lists, downloads and keeps metadata', async () => {
    const cb = await cp.createCodebase({ name: 'demo', ownerId: 'alice' });
    expect(cb).toMatchObject({ kind: 'stored', fileCount: 0, sizeBytes: 0, ownerId: 'alice' });
    await cp.uploadFile(cb.id, 'README.md', '# hi\n');
    await cp.uploadFile(cb.id, 'src/app.py', Readable.from([Buffer.from('print('), Buffer.from('1)\n')]));
    await cp.uploadFile(cb.id, 'src/app.py', 'print(2)\n'); // replaced: still one file
    await cp.uploadFile(cb.id, 'a/b/c/deep.txt', new Uint8Array([1, 2, 3]));
    const info = await cp.getCodebase(cb.id);
    expect(info.fileCount).toBe(3);
    expect(info.sizeBytes).toBe(5 + 9 + 3);
    const top = await cp.listFiles(cb.id);
    expect(top.map((f) => [f.path, f.isDir])).toEqual([
      ['README.md', false],
      ['a', true],
      ['src', true],
    ]);
    const all = await cp.listFiles(cb.id, { recursive: true });
    expect(all.filter((f) => !f.isDir).map((f) => [f.path, f.size])).toEqual([
      ['README.md', 5],
      ['a/b/c/deep.txt', 3],
      ['src/app.py', 9],
    ]);
    expect((await cp.listFiles(cb.id, { path: 'src' })).map((f) => f.path)).toEqual(['src/app.py']);
    const { stream, size } = await cp.downloadFile(cb.id, 'src/app.py');
    expect(size).toBe(9);
    expect(await text(stream)).toBe('print(2)\n');
    await expect(cp.downloadFile(cb.id, 'missing.txt')).rejects.toBeInstanceOf(NotFoundError);
    await cp.deleteCodebase(cb.id);
  });

  it('rejects bad paths, oversized files and symlinks in the upload path', async () => {
    const cb = await cp.createCodebase({ name: 'strict' });
    for (const bad of ['../escape', '/etc/passwd', 'a//b', 'a/./b', 'a/../b', 'x\0y', '', 'dir/']) {
      await expect(cp.uploadFile(cb.id, bad, 'x')).rejects.toBeInstanceOf(InvalidArgumentError);
    }
    await expect(cp.uploadFile(cb.id, 'big.bin', Buffer.alloc(1024 * 1024 + 1))).rejects.toThrow(
      /larger than the upload limit/,
    );
    await expect(cp.uploadFile(cb.id, 'small.bin', 'abc', { maxBytes: 2 })).rejects.toThrow(/limit of 2/);
    // A symlink inside the codebase (as a sandbox's commit can leave) is never followed by an upload.
    const outside = join(dirs.root, 'outside');
    await mkdir(outside);
    const files = cp.layout.codebaseFiles(cb.id);
    await symlink(outside, join(files, 'link'));
    await symlink(join(outside, 'target.txt'), join(files, 'file-link'));
    await expect(cp.uploadFile(cb.id, 'link/evil.txt', 'pwned')).rejects.toThrow(/symlink/);
    await cp.uploadFile(cb.id, 'file-link', 'replaced'); // replaces the link itself
    expect(await readdir(outside)).toEqual([]);
    expect(await readFile(join(files, 'file-link'), 'utf8')).toBe('replaced');
    // Nothing half-written is left behind and nothing was counted.
    expect((await cp.listFiles(cb.id)).map((f) => f.path)).toEqual(['file-link', 'link']);
    await expect(cp.downloadFile(cb.id, 'link/x')).rejects.toThrow(/symlink/);
    await cp.deleteCodebase(cb.id);
  });

  it('validates ids before touching anything', async () => {
    await expect(cp.uploadFile('cb_../../etc', 'x', 'y')).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(cp.getCodebase('cb_00000000-0000-4000-8000-000000000000')).rejects.toThrow(
      /codebase cb_00000000-0000-4000-8000-000000000000 not found/,
    );
    await expect(cp.getSandbox('sb_nope')).rejects.toThrow(InvalidArgumentError);
  });

  it('runs a sandbox on a stored codebase, refuses deletion while it exists, and survives a restart', async () => {
    const cb = await cp.createCodebase({ name: 'persist' });
    await cp.uploadFile(cb.id, 'hello.txt', 'stored hello\n');
    const { id } = await cp.createSandbox({ codebaseId: cb.id, labels: { team: 'a' } });
    await cp.startSandbox(id);
    expect((await cp.run(id, 'cat /workspace/hello.txt')).stdout).toBe('stored hello\n');
    await cp.run(
      id,
      'echo out > /workspace/output/x.txt || (mkdir -p /workspace/output && echo out > /workspace/output/x.txt)',
    );
    await expect(cp.deleteCodebase(cb.id)).rejects.toBeInstanceOf(WrongStateError);
    await cp.close();

    cp = await ControlPlane.open({ dataDir: dirs.dataDir, maxUploadBytes: 1024 * 1024 });
    const again = await cp.getSandbox(id);
    expect(again.state).toBe('STOPPED');
    expect(again.labels).toEqual({ team: 'a' });
    expect(await cp.getCodebase(cb.id)).toMatchObject({ name: 'persist', fileCount: 1 });
    await cp.startSandbox(id);
    expect((await cp.run(id, 'cat /workspace/output/x.txt')).stdout).toBe('out\n');
    await cp.destroySandbox(id);
    await cp.deleteCodebase(cb.id);
    await expect(readdir(cp.layout.codebaseDir(cb.id))).rejects.toThrow(/ENOENT/);
  });
});
