// A linked directory replaced by a symlink to /etc (or a parent of it swapped for one), then
// `GET /v1/codebases/cb_…/files/shadow` on `agentfense serve`: followed, the API hands out /etc/shadow.
// Defence: every API access to a linked codebase opens its root without following a symlink in any
// component and checks the identity recorded when it was linked (control codebases/roots.ts).
import { mkdir, rename, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { client, launchServer, scratch, stopAndCheck } from '../helpers/http-fixture.js';

/** A data directory with `dir` linked as a codebase (as `agentfense run --keep` leaves one). */
async function linkIn(dataDir: string, dir: string): Promise<string> {
  const cp = await ControlPlane.open({ dataDir, workerPoolSize: 0 });
  try {
    return (await cp.linkCodebase({ path: dir, apiVisible: true })).id;
  } finally {
    await cp.close();
  }
}

async function serve(dataDir: string): Promise<ReturnType<typeof client>> {
  const served = await launchServer([], dataDir);
  onTestFinished(async () => {
    await stopAndCheck(served);
  });
  return client(served.url, served.token);
}

/** The answer must be a refusal naming the codebase and what changed, with no byte of /etc in it. */
function expectRefused(answer: { status: number; text: string }, codebaseId: string, what: RegExp): void {
  // AF_WRONG_STATE is gRPC FAILED_PRECONDITION (9), which grpc-gateway answers with HTTP 400.
  expect(answer.status, answer.text).toBe(400);
  expect(answer.text).toContain('"reason":"AF_WRONG_STATE"');
  expect(answer.text).toContain(codebaseId);
  expect(answer.text).toMatch(what);
  expect(answer.text).not.toMatch(/root:/);
}

describe('API file access to a linked directory swapped for a symlink', () => {
  it('the linked directory itself replaced by a symlink to /etc: download and listing refused', async () => {
    const dir = await scratch('af-linked-etc-');
    const repo = join(dir, 'repo');
    await mkdir(repo);
    await writeFile(join(repo, 'README.md'), 'readme\n');
    const cb = await linkIn(join(dir, 'data'), repo);
    await rename(repo, `${repo}.moved`);
    await symlink('/etc', repo);
    const api = await serve(join(dir, 'data'));

    for (const path of ['shadow', 'passwd', 'hostname']) {
      expectRefused(await api('GET', `/v1/codebases/${cb}/files/${path}`), cb, /is a symlink/);
    }
    expectRefused(await api('GET', `/v1/codebases/${cb}/files?path=`), cb, /is a symlink/);
  });

  it('a parent swapped for a symlink to a directory holding a same-named copy: refused', async () => {
    const dir = await scratch('af-linked-parent-');
    const repo = join(dir, 'home', 'repo');
    await mkdir(repo, { recursive: true });
    await writeFile(join(repo, 'README.md'), 'readme\n');
    const other = join(dir, 'other');
    await mkdir(join(other, 'repo'), { recursive: true });
    await writeFile(join(other, 'repo', 'shadow'), 'root:secret\n');
    const cb = await linkIn(join(dir, 'data'), repo);
    await rename(join(dir, 'home'), join(dir, 'home.moved'));
    await symlink(other, join(dir, 'home'));
    const api = await serve(join(dir, 'data'));

    expectRefused(await api('GET', `/v1/codebases/${cb}/files/shadow`), cb, /home is a symlink/);
    expectRefused(await api('GET', `/v1/codebases/${cb}/files?path=`), cb, /home is a symlink/);
  });

  it('the directory put back as it was linked: served again', async () => {
    const dir = await scratch('af-linked-back-');
    const repo = join(dir, 'repo');
    await mkdir(repo);
    await writeFile(join(repo, 'README.md'), 'readme\n');
    const cb = await linkIn(join(dir, 'data'), repo);
    await rename(repo, `${repo}.moved`);
    await rename(`${repo}.moved`, repo);
    const api = await serve(join(dir, 'data'));
    const answer = await api('GET', `/v1/codebases/${cb}/files/README.md`);
    expect(answer.status, answer.text).toBe(200);
    expect(answer.text).toBe('readme\n');
  });
});
