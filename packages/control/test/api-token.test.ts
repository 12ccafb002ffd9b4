// The data directory's API token (http/api-token.ts) on a real file system: made once with mode 0600,
// the same token for every later reader and for servers starting at once, and refused when it could be
// known or replaced by someone else (a symlink, a file others may read).
import { chmod, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '@agentfense/protocol';
import { apiTokenPath, ensureApiToken, readApiToken } from '../src/http/api-token.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'af-api-token-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('the data directory API token', () => {
  it('is made once (0600, 256 random bits) and read back the same by every later caller', async () => {
    expect(await readApiToken(dir)).toBeUndefined();
    const made = await Promise.all([ensureApiToken(dir), ensureApiToken(dir), ensureApiToken(dir)]);
    expect(made.filter((m) => m.created)).toHaveLength(1);
    const [first] = made;
    expect(first?.token).toMatch(/^[0-9a-f]{64}$/);
    expect(new Set(made.map((m) => m.token)).size).toBe(1);
    expect((await stat(apiTokenPath(dir))).mode & 0o777).toBe(0o600);
    expect(await readApiToken(dir)).toBe(first?.token);
    expect((await ensureApiToken(dir)).created).toBe(false);
  });

  it('refuses a symlink at its place, and a file others may read, naming the fix', async () => {
    const elsewhere = join(dir, 'planted');
    await writeFile(elsewhere, `${'a'.repeat(64)}\n`, { mode: 0o600 });
    await symlink(elsewhere, apiTokenPath(dir));
    await expect(ensureApiToken(dir)).rejects.toThrow(/api-token is a symlink; remove it/);
    await rm(apiTokenPath(dir));
    await writeFile(apiTokenPath(dir), `${'a'.repeat(64)}\n`, { mode: 0o600 });
    await chmod(apiTokenPath(dir), 0o640);
    const refused = readApiToken(dir);
    await expect(refused).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(readApiToken(dir)).rejects.toThrow(/mode 0600; it is 640.*remove it/);
    await chmod(apiTokenPath(dir), 0o600);
    await writeFile(apiTokenPath(dir), 'short\n');
    await expect(readApiToken(dir)).rejects.toThrow(/does not hold a token/);
    expect(await readFile(elsewhere, 'utf8')).toBe(`${'a'.repeat(64)}\n`);
  });
});
