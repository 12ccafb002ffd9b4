// Which Debian mirror and release the base image is built from: apt's own sources, deb822 or one-line.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { detectDebianSource, findMirror } from '../src/setup/base-image.js';

describe('findMirror', () => {
  it('takes the first deb822 stanza offering the suite, not security or updates', () => {
    const sources = [
      'Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\nComponents: main\n',
      'Types: deb deb-src\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\nComponents: main\n',
    ].join('\n');
    expect(findMirror([sources], 'bookworm')).toBe('http://mirror.example/debian');
  });

  it('reads one-line sources with options', () => {
    expect(findMirror(['deb [arch=amd64] https://m.example/debian bookworm main\n'], 'bookworm')).toBe(
      'https://m.example/debian',
    );
    expect(
      findMirror(['deb https://packages.other.example/apt cloud-sdk main\n'], 'bookworm'),
    ).toBeUndefined();
  });
});

describe('detectDebianSource', () => {
  it('combines the codename of os-release with the mirror apt uses', async () => {
    const etc = await mkdtemp(join(tmpdir(), 'af-etc-'));
    onTestFinished(() => rm(etc, { recursive: true, force: true }));
    await mkdir(join(etc, 'apt/sources.list.d'), { recursive: true });
    await writeFile(join(etc, 'os-release'), 'ID=debian\nVERSION_CODENAME=bookworm\n');
    await writeFile(
      join(etc, 'apt/sources.list.d/debian.sources'),
      'Types: deb\nURIs: http://deb.example/debian\nSuites: bookworm\nComponents: main\n',
    );
    expect(await detectDebianSource({ etc })).toEqual({
      mirror: 'http://deb.example/debian',
      suite: 'bookworm',
    });
    await rm(join(etc, 'apt/sources.list.d/debian.sources'));
    expect(await detectDebianSource({ etc })).toEqual({
      mirror: 'http://deb.debian.org/debian',
      suite: 'bookworm',
    });
  });
});
