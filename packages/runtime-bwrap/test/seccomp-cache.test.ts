// The seccomp program cache: a file another local user planted under the cache's name (the cache sits in
// the temporary directory for a library user without a data directory) must never be loaded as the
// filter; the real program is compiled instead.
import { existsSync, readdirSync } from 'node:fs';
import { chmod, chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_SECCOMP_COMPILER, loadSeccompFilter } from '../src/exec/seccomp.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

const canRun = existsSync(DEFAULT_SECCOMP_COMPILER) && process.geteuid?.() === 0;

describe.skipIf(!canRun)(
  'seccomp program cache (needs the compiler from scripts/setup, and root to chown)',
  () => {
    it('ignores a cached program owned by another user or writable by others, and compiles the real one', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'af-seccomp-cache-'));
      dirs.push(dir);
      const real = await loadSeccompFilter({ cacheDir: dir });
      expect(real.length % 8).toBe(0);
      const [name] = readdirSync(dir);
      const cached = join(dir, name ?? '');
      // A "filter" of one instruction: RET ALLOW (what a planted permissive program would look like).
      const planted = Buffer.from([0x06, 0, 0, 0, 0, 0, 0xff, 0x7f]);

      await writeFile(cached, planted);
      await chown(cached, 12345, 12345);
      expect(await loadSeccompFilter({ cacheDir: dir })).toEqual(real);

      await rm(cached);
      await writeFile(cached, planted, { mode: 0o666 });
      await chmod(cached, 0o666); // past the umask
      expect(await loadSeccompFilter({ cacheDir: dir })).toEqual(real);

      // This user's own, properly protected cache is used as it is (the planted bytes prove it was read).
      await rm(cached);
      await writeFile(cached, planted, { mode: 0o644 });
      expect(await loadSeccompFilter({ cacheDir: dir })).toEqual(planted);
    });
  },
);
