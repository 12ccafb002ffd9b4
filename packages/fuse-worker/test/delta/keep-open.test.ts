// Delta.openToKeepIfIdle opens, without a thread-pool trip, the host file an UNLINK keeps for processes
// that still have it open: the sandbox's own file read-write, a codebase file read-only, and nothing
// (undefined: openToKeep() decides) while a namespace change is queued or for what is not a file.
import { constants } from 'node:fs';
import { describe, expect, it } from 'vitest';

import { fixture } from './fixture.js';

async function readAll(handle: {
  read: (b: Buffer, o: number, l: number, p: number) => Promise<{ bytesRead: number }>;
}): Promise<string> {
  const buf = Buffer.alloc(64);
  const { bytesRead } = await handle.read(buf, 0, buf.length, 0);
  return buf.subarray(0, bytesRead).toString();
}

describe('Delta.openToKeepIfIdle', () => {
  it("keeps the delta's file read-write and a codebase file read-only, both readable after the unlink", async () => {
    const { delta } = await fixture({ 'src/a.txt': 'codebase' });
    const fh = await delta.create('/src/new.txt', 0o644, constants.O_WRONLY);
    await fh.writeFile('mine');
    await fh.close();
    await delta.lookup('/src/new.txt'); // the walk caches the directories' fds
    const mine = delta.openToKeepIfIdle('/src/new.txt');
    const theirs = delta.openToKeepIfIdle('/src/a.txt');
    expect(mine?.writable).toBe(true);
    expect(theirs?.writable).toBe(false);
    await delta.unlink('/src/new.txt');
    await delta.unlink('/src/a.txt');
    expect(await readAll(mine!.handle)).toBe('mine');
    expect(await readAll(theirs!.handle)).toBe('codebase');
    await mine!.handle.close();
    await theirs!.handle.close();
  });

  it('declines a directory, a missing name and any file while a change is queued', async () => {
    const { delta } = await fixture({ 'src/a.txt': 'codebase' });
    await delta.lookup('/src/a.txt');
    expect(delta.openToKeepIfIdle('/src')).toBeUndefined();
    expect(delta.openToKeepIfIdle('/src/none')).toBeUndefined();
    const pending = delta.mkdir('/src/d', 0o755);
    expect(delta.openToKeepIfIdle('/src/a.txt')).toBeUndefined();
    await pending;
    const kept = delta.openToKeepIfIdle('/src/a.txt');
    expect(kept?.writable).toBe(false);
    await kept?.handle.close();
  });
});
