// Delta.setattrIfIdle changes a mode or times at once where the entry is already the delta's and its
// directory's fd is cached, and declines (false, nothing changed) where setattr() must copy up, truncate,
// chown or wait for a change in flight: the host entry must end as setattr() leaves it.
import { constants } from 'node:fs';
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { fixture } from './fixture.js';

const MTIME = 1_600_000_000_123_456_789n;
const ATIME = 1_500_000_000_987_654_321n;

describe('Delta.setattrIfIdle', () => {
  it("sets a delta file's mode and exact times at once, as setattr() does", async () => {
    const { delta, deltaDir } = await fixture({ 'src/a.txt': 'a' });
    await (await delta.create('/src/new.txt', 0o644, constants.O_WRONLY)).close();
    await delta.lookup('/src/new.txt'); // the walk caches the directory's fd
    expect(delta.setattrIfIdle('/src/new.txt', { mode: 0o600, atime: ATIME, mtime: MTIME })).toBe(true);
    const st = await lstat(join(deltaDir, 'upper', 'src', 'new.txt'), { bigint: true });
    expect(Number(st.mode) & 0o7777).toBe(0o600);
    expect(st.mtimeNs).toBe(MTIME);
    expect(st.atimeNs).toBe(ATIME);
    const found = await delta.lookup('/src/new.txt');
    expect(found?.stat.mtimeNs).toBe(MTIME);
  });

  it('declines a codebase file (a copy-up), a truncation, a chown and a change queued behind the lock', async () => {
    const { delta, lower } = await fixture({ 'src/a.txt': 'a' });
    await delta.lookup('/src/a.txt');
    expect(delta.setattrIfIdle('/src/a.txt', { mode: 0o600 })).toBe(false);
    expect(Number((await lstat(join(lower, 'src', 'a.txt'))).mode) & 0o7777).not.toBe(0o600);
    await (await delta.create('/src/new.txt', 0o644, constants.O_WRONLY)).close();
    await delta.lookup('/src/new.txt');
    expect(delta.setattrIfIdle('/src/new.txt', { size: 0 })).toBe(false);
    expect(delta.setattrIfIdle('/src/new.txt', { uid: 0 })).toBe(false);
    const pending = delta.mkdir('/src/d', 0o755);
    expect(delta.setattrIfIdle('/src/new.txt', { mode: 0o600 })).toBe(false);
    await pending;
    expect(delta.setattrIfIdle('/src/new.txt', { mode: 0o600 })).toBe(true);
  });
});
