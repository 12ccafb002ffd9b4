// Uploads that end half-way over an existing file: a gRPC UploadFiles cancelled by the client (the
// original's SDK sends `total_size` 0, so the size cannot tell), an HTTP PUT whose connection drops.
// grpc-js ends a cancelled call's message stream as if the client had finished, and reports the cancel
// a few ticks later: taken for a complete upload, the file was replaced by the partial bytes, and 200
// cancelled uploads left 200 empty files. Defence: the upload goes to a temporary file in the same
// directory, fsynced, and is renamed over the name only if the call was not cancelled; otherwise the
// temporary file is removed (codebases/service.ts, grpc/codebase-service.ts).
import { readdir } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/control-fixtures.js';
import { status, uploadMessages } from '../helpers/grpc-client.js';
import type { GrpcClient } from '../helpers/grpc-client.js';
import { startGrpcServer } from '../helpers/grpc-serve.js';
import { client, startServer } from '../helpers/http-fixture.js';

const ORIGINAL = Buffer.from('the original content\n');

/** What a download of `path` returns (joined chunks). */
async function download(grpc: GrpcClient, codebaseId: string, path: string): Promise<string> {
  const { messages } = await grpc.stream('codebase', 'DownloadFile', {
    codebase_id: codebaseId,
    file_path: path,
  });
  return Buffer.concat(messages.map((m: { data: Buffer }) => m.data)).toString();
}

/**
 * Names in a stored codebase's directory on disk once no upload is in progress there: the server handles
 * each cancelled or dropped upload on its own time, so the last ones may still hold a temporary file.
 */
function settledOnDisk(dataDir: string, codebaseId: string): Promise<string[]> {
  return waitFor('the cancelled uploads to settle', async () => {
    const names = (await readdir(join(dataDir, 'codebases', codebaseId, 'files'))).sort();
    return names.some((name) => name.startsWith('.agentfense-upload-')) ? undefined : names;
  });
}

/** A PUT that declares `declared` bytes, sends `sent` of them, then drops the connection. */
function droppedPut(
  url: string,
  token: string | undefined,
  path: string,
  declared: number,
  sent: Buffer,
): Promise<void> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const req = request({
      host: hostname,
      port,
      method: 'PUT',
      path,
      headers: {
        'content-length': String(declared),
        'content-type': 'application/octet-stream',
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      },
    });
    req.on('error', () => resolve());
    req.on('close', () => resolve());
    req.write(sent, () => req.destroy());
  });
}

describe('uploads that end half-way over an existing file', () => {
  it('gRPC: cancelled uploads leave the old file and no debris, 200 times over', async () => {
    const served = await startGrpcServer();
    const grpc = served.client();
    const created = (await grpc.unary('codebase', 'CreateCodebase', { name: 'cancel' })) as { id: string };
    const cb = created.id;
    await grpc.upload(uploadMessages(cb, 'a.txt', ORIGINAL));

    const partial = [
      { metadata: { codebase_id: cb, file_path: 'a.txt', total_size: 0 } },
      { data: Buffer.from('partial') },
    ];
    expect(await grpc.cancelUpload(partial)).toBe(status.CANCELLED);
    // In sequence: by the end the server has long handled the first ones.
    for (let i = 0; i < 200; i++) {
      const metadata = { metadata: { codebase_id: cb, file_path: `new-${i}.txt`, total_size: 0 } };
      const messages = i % 2 === 0 ? [metadata] : [metadata, { data: Buffer.from('half') }];
      expect(await grpc.cancelUpload(messages)).toBe(status.CANCELLED);
    }
    expect(await grpc.cancelUpload(partial)).toBe(status.CANCELLED);

    expect(await settledOnDisk(served.served.dataDir, cb)).toEqual(['a.txt']);
    expect(await download(grpc, cb, 'a.txt')).toBe(ORIGINAL.toString());
    const listed = (await grpc.unary('codebase', 'ListFiles', {
      codebase_id: cb,
      path: '',
      recursive: true,
    })) as { files: { path: string }[] };
    expect(listed.files.map((f) => f.path)).toEqual(['a.txt']);
  });

  it('HTTP: a PUT whose connection drops half-way leaves the old file and no debris', async () => {
    const served = await startServer();
    const api = client(served.url, served.token);
    const cb = ((await api('POST', '/v1/codebases', { name: 'drop' })).json as { id: string }).id;
    expect((await api('PUT', `/v1/codebases/${cb}/files/a.txt`, ORIGINAL)).status).toBe(200);

    for (let i = 0; i < 20; i++) {
      await droppedPut(
        served.url,
        served.token,
        `/v1/codebases/${cb}/files/a.txt`,
        1000,
        Buffer.from('partial'),
      );
      await droppedPut(
        served.url,
        served.token,
        `/v1/codebases/${cb}/files/new-${i}.txt`,
        1000,
        Buffer.from('x'),
      );
    }
    expect((await api('PUT', `/v1/codebases/${cb}/files/b.txt`, 'b\n')).status).toBe(200);

    expect(await settledOnDisk(served.dataDir, cb)).toEqual(['a.txt', 'b.txt']);
    expect((await api('GET', `/v1/codebases/${cb}/files/a.txt`)).text).toBe(ORIGINAL.toString());
  });
});
