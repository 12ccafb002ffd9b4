// The host cache behind the one-shot CLI's speed: a prepared /etc is reused while the host
// entries it was copied from stay the same, rebuilt when one changes, and an outdated copy no live process
// uses is removed; a probe result only counts for the same key.
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cachedEtc, etcFingerprint, probeCached, recordProbe } from '../src/host/host-cache.js';

describe('host cache', () => {
  let root = '';
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'af-host-cache-'));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('reuses the /etc copy while the host is unchanged and rebuilds it when a copied file changes', async () => {
    const hostEtc = join(root, 'host-etc');
    const runDir = join(root, 'run');
    await mkdir(join(hostEtc, 'ld.so.conf.d'), { recursive: true });
    await writeFile(join(hostEtc, 'ld.so.conf.d', 'a.conf'), '/usr/lib/a\n');
    const entries = ['ld.so.conf.d'];
    let builds = 0;
    const prepare = async () =>
      cachedEtc({
        runDir,
        fingerprint: etcFingerprint(hostEtc, entries, {}),
        build: async (dir) => {
          builds++;
          await mkdir(dir, { recursive: true });
          await writeFile(join(dir, 'copy'), await readFile(join(hostEtc, 'ld.so.conf.d', 'a.conf')));
        },
      });
    const first = await prepare();
    expect(await prepare()).toBe(first);
    expect(builds).toBe(1);

    // A file inside a copied directory changes (its directory's mtime does not): a new copy is made. The
    // old one stays while a live process (here: this one) marks it as in use.
    await writeFile(join(hostEtc, 'ld.so.conf.d', 'a.conf'), '/usr/lib/b\n');
    const second = await prepare();
    expect(second).not.toBe(first);
    expect(builds).toBe(2);
    expect(await readFile(join(second, 'copy'), 'utf8')).toBe('/usr/lib/b\n');
    const copies = async () => (await readdir(runDir)).filter((n) => !n.includes('.')).sort();
    const firstName = first.split('/').at(-2) ?? '';
    const secondName = second.split('/').at(-2) ?? '';
    expect(await copies()).toEqual([firstName, secondName].sort());
    // Once no live process marks it (its user exited), the next preparation removes it.
    await rm(join(runDir, `${firstName}.${process.pid}`));
    expect(await prepare()).toBe(second);
    expect(await copies()).toEqual([secondName]);
  });

  it('counts a recorded probe only for the same key', async () => {
    await mkdir(join(root, 'run'));
    const run = join(root, 'run');
    expect(await probeCached(run, 'k1')).toBe(false);
    await recordProbe(run, 'k1');
    expect(await probeCached(run, 'k1')).toBe(true);
    expect(await probeCached(run, 'k2')).toBe(false);
  });
});
