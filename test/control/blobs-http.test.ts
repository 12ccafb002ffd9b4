// The blob store's HTTP backend end to end: a real `agentfense serve --blobs DIR --node-agent-token-file F`
// serves `GET /v1/blobs/<digest>`, and a node's cache (what `agentfense node --blobs http://…` opens)
// materialises a snapshot through it with the node agents' token, no shared filesystem between them.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, readlink, stat, writeFile, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FsBlobStore, HttpBlobStore, NodeBlobCache, snapshotDirectory } from '@agentfense/blobs';
import { scratch, startServer, tokenFile } from '../helpers/http-fixture.js';

describe('serve --blobs: the HTTP blob backend', () => {
  it('a node cache materialises a snapshot from serve over HTTP', async () => {
    const dir = await scratch('af-blobs-http-');
    const nodeToken = randomBytes(24).toString('hex');
    const { file } = await tokenFile(dir, nodeToken);
    const storeDir = join(dir, 'store');
    const served = await startServer(['--blobs', storeDir, '--node-agent-token-file', file]);

    // The API tier's side: a codebase tree snapshotted into serve's store.
    const tree = join(dir, 'tree');
    await mkdir(join(tree, 'src'), { recursive: true });
    await writeFile(join(tree, 'README.md'), '# app\n');
    await writeFile(join(tree, 'src', 'run.sh'), 'echo run\n', { mode: 0o755 });
    await writeFile(join(tree, 'big.bin'), randomBytes(3 << 20));
    await symlink('src/run.sh', join(tree, 'run'));
    const { snapshotId } = await snapshotDirectory(await FsBlobStore.open(storeDir), tree);

    // The node's side: nothing shared but the URL and the token.
    const http = new HttpBlobStore({ url: served.url, token: nodeToken });
    expect(await http.size(snapshotId)).toBeGreaterThan(0);
    const cache = await NodeBlobCache.open({ root: join(dir, 'node-cache'), store: http, maxBytes: 1 << 30 });
    const lease = await cache.materialise(snapshotId);
    expect(await readFile(join(lease.path, 'README.md'), 'utf8')).toBe('# app\n');
    expect(await readFile(join(lease.path, 'big.bin'))).toEqual(await readFile(join(tree, 'big.bin')));
    expect((await stat(join(lease.path, 'src', 'run.sh'))).mode & 0o777).toBe(0o755);
    expect(await readlink(join(lease.path, 'run'))).toBe('src/run.sh');
    lease.release();
  });

  it('refuses --blobs without the node agents token, and the token file without --blobs', async () => {
    const { execa } = await import('execa');
    const { bin } = await import('../helpers/http-fixture.js');
    const dir = await scratch('af-blobs-http-');
    const without = await execa(process.execPath, [bin, 'serve', '--data', dir, '--blobs', dir], {
      reject: false,
    });
    expect(without.exitCode).toBe(2);
    expect(without.stderr).toContain('--blobs needs --node-agent-token-file');
    const { file } = await tokenFile(dir);
    const alone = await execa(
      process.execPath,
      [bin, 'serve', '--data', dir, '--node-agent-token-file', file],
      {
        reject: false,
      },
    );
    expect(alone.exitCode).toBe(2);
    expect(alone.stderr).toContain('--node-agent-token-file needs --orchestrator swarm or --blobs');
  });
});
