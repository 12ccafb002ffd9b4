// The sandbox's /etc: only listed, world-readable host entries are copied; symlinks stay symlinks; our
// passwd/group/hosts replace the host's.
import {
  chmod,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { generatedEtcContents, prepareSandboxEtc } from '../src/sandbox-fs/etc-files.js';

const quiet = { debug: () => undefined, warn: () => undefined };

describe('prepareSandboxEtc', () => {
  let root = '';
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'af-etc-'));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('copies listed entries only, keeps symlinks, skips root-only files, writes its own passwd', async () => {
    const hostEtc = join(root, 'host');
    await mkdir(join(hostEtc, 'ssl', 'certs'), { recursive: true });
    await mkdir(join(hostEtc, 'ssl', 'private'), { recursive: true });
    await writeFile(join(hostEtc, 'ssl', 'private', 'key.pem'), 'PRIVATE');
    await symlink('/usr/share/ca-certificates/x.crt', join(hostEtc, 'ssl', 'certs', 'x.pem'));
    await writeFile(join(hostEtc, 'host.conf'), 'multi on\n');
    await writeFile(join(hostEtc, 'resolv.conf'), 'nameserver 10.0.0.1\n');
    await writeFile(join(hostEtc, 'secret.conf'), 'token');
    await chmod(join(hostEtc, 'secret.conf'), 0o600);
    await writeFile(
      join(hostEtc, 'passwd'),
      'root:x:0:0::/root:/bin/bash\nhostuser:x:1001:1001::/home/hostuser:/bin/bash\n',
    );

    const dir = join(root, 'sandbox-etc');
    await prepareSandboxEtc({
      dir,
      hostEtc,
      entries: [
        'ssl/certs',
        'host.conf',
        'resolv.conf',
        'secret.conf',
        'missing.conf',
        'passwd',
        '../escape',
      ],
      logger: quiet,
    });

    expect(await readlink(join(dir, 'ssl', 'certs', 'x.pem'))).toBe('/usr/share/ca-certificates/x.crt');
    expect(await readFile(join(dir, 'host.conf'), 'utf8')).toBe('multi on\n');
    // Never the host's resolvers: the sandbox's DNS is its own loopback (its policy point, if any).
    expect(await readFile(join(dir, 'resolv.conf'), 'utf8')).toBe('nameserver 127.0.0.1\noptions edns0\n');
    await expect(lstat(join(dir, 'ssl', 'private'))).rejects.toThrow(/ENOENT/);
    await expect(lstat(join(dir, 'secret.conf'))).rejects.toThrow(/ENOENT/);
    await expect(lstat(join(dir, 'missing.conf'))).rejects.toThrow(/ENOENT/);
    const passwd = await readFile(join(dir, 'passwd'), 'utf8');
    expect(passwd).toBe(generatedEtcContents()['passwd']);
    expect(passwd).not.toContain('hostuser');
    expect(passwd).toContain('agent:x:1000:1000:');
  });

  it('never writes through a copied symlink (it runs as root)', async () => {
    const hostEtc = join(root, 'host');
    const outside = join(root, 'outside');
    await mkdir(join(outside, 'certs'), { recursive: true });
    await mkdir(hostEtc);
    await symlink(outside, join(hostEtc, 'ssl'));
    const dir = join(root, 'sandbox-etc');
    await expect(
      prepareSandboxEtc({ dir, hostEtc, entries: ['ssl', 'ssl/certs'], logger: quiet }),
    ).rejects.toThrow(/below a symlink/);
    expect(await readlink(join(dir, 'ssl'))).toBe(outside);
    // Nothing was created in the symlink's target.
    expect(await readdir(join(outside, 'certs'))).toEqual([]);
  });
});
