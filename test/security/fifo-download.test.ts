// A FIFO in a linked codebase, downloaded 5 times at once through `agentfense serve`: opening a FIFO for
// reading waits for a writer, and each waiting open holds one of libuv's four file I/O threads, so every
// later download, listing and sandbox creation of the server hangs until someone writes the FIFO.
// Defence: API file access opens without blocking (O_NONBLOCK) and checks the type on the opened
// descriptor, refusing anything but regular files with an error naming what it is (codebases/safe-fs.ts).
import { constants } from 'node:fs';
import { mkdir, open, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { client, launchServer, scratch, stopAndCheck } from '../helpers/http-fixture.js';

/** Every request gets this long; the server answers a refusal in milliseconds. */
const ANSWER_MS = 15_000;

/** Releases readers blocked in open(2) of the FIFO (without the defence) so the server can stop. */
async function releaseReaders(fifo: string): Promise<void> {
  for (let i = 0; i < 20; i++) {
    const writer = await open(fifo, constants.O_WRONLY | constants.O_NONBLOCK).catch(() => undefined);
    if (writer === undefined) return; // ENXIO: nobody is waiting any more
    await writer.close();
    await new Promise((done) => setTimeout(done, 50));
  }
}

describe('a FIFO in a linked codebase, downloaded through the API', () => {
  it('5 downloads at once are refused at once, naming a FIFO, and the server keeps serving', async () => {
    const dir = await scratch('af-fifo-');
    const repo = join(dir, 'repo');
    await mkdir(repo);
    await writeFile(join(repo, 'README.md'), 'readme\n');
    const fifo = join(repo, 'pipe');
    await execa('mkfifo', [fifo]);
    const dataDir = join(dir, 'data');
    const cp = await ControlPlane.open({ dataDir, workerPoolSize: 0 });
    // Linked for the API (a locally linked codebase is not the API's to serve).
    const cb = (await cp.linkCodebase({ path: repo, apiVisible: true })).id;
    await cp.close();
    const served = await launchServer([], dataDir);
    onTestFinished(async () => {
      await stopAndCheck(served);
    });
    onTestFinished(() => releaseReaders(fifo)); // runs first (after-hooks run in reverse)
    const api = client(served.url, served.token);
    // Without the defence the request never gets an answer: fail after ANSWER_MS, naming it.
    const get = (path: string): ReturnType<typeof api> =>
      Promise.race([
        api('GET', path),
        new Promise<never>((_, reject) =>
          setTimeout(
            () => reject(new Error(`GET ${path} got no answer in ${ANSWER_MS} ms`)),
            ANSWER_MS,
          ).unref(),
        ),
      ]);

    const downloads = await Promise.all(
      Array.from({ length: 5 }, () => get(`/v1/codebases/${cb}/files/pipe`)),
    );
    for (const answer of downloads) {
      expect(answer.status, answer.text).toBe(400);
      expect(answer.text).toContain('"reason":"AF_INVALID_ARGUMENT"');
      expect(answer.text).toMatch(/pipe is a FIFO \(named pipe\), not a regular file/);
    }

    // The server's file I/O is free: a download, a listing and a sandbox start still answer.
    const readme = await get(`/v1/codebases/${cb}/files/README.md`);
    expect(readme.text).toBe('readme\n');
    const listing = await get(`/v1/codebases/${cb}/files?path=`);
    const { files } = listing.json as { files: { path: string }[] };
    expect(files.map((f) => f.path).sort()).toEqual(['README.md', 'pipe']);
    const sandbox = await api('POST', '/v1/sandboxes', { codebase_id: cb, start: true });
    const created = sandbox.json as { id: string; status: string };
    expect(created.status, sandbox.text).toBe('SANDBOX_STATUS_RUNNING');
    expect((await api('DELETE', `/v1/sandboxes/${created.id}`)).status).toBe(200);
  });
});
