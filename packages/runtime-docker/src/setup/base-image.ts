// Building the default base image (`agentfense/base:latest`) without any registry: a Debian minbase root
// filesystem from `debootstrap` and the Debian mirror the host's apt already uses, trimmed, with the
// sandbox user added, packed once into a tarball cached under /var/cache/agentfense, then `docker import`ed.
// Later imports (a new engine, a wiped data root) reuse the tarball: seconds instead of a minute.
import { constants } from 'node:fs';
import { access, appendFile, mkdir, mkdtemp, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { posix } from 'node:path';
import { execa } from 'execa';
import { InternalError, UnavailableError } from '@agentfense/protocol';
import { DEFAULT_IMAGE } from '../exec/args.js';
import { engineError } from '../engine/engine-errors.js';
import { createDockerCli, runDocker } from './cli.js';
import { unmountBelow } from './mounts.js';

/** Default directory of the cached root filesystem tarball. */
export const DEFAULT_IMAGE_CACHE_DIR = '/var/cache/agentfense';
/** Fallback mirror when apt's sources name none. */
const DEFAULT_MIRROR = 'http://deb.debian.org/debian';
/** debootstrap downloads ~40 MB and unpacks ~200 MB: about a minute on a loaded host. */
const DEBOOTSTRAP_TIMEOUT_MS = 15 * 60_000;
/** Importing the ~115 MB tarball takes a few seconds. */
const IMPORT_TIMEOUT_MS = 5 * 60_000;

/** Paths removed from the root filesystem: documentation and caches nobody in a sandbox reads. */
const TRIM = [
  'usr/share/doc',
  'usr/share/man',
  'usr/share/info',
  'usr/share/lintian',
  'var/cache/apt/archives',
  'var/cache/apt/pkgcache.bin',
  'var/cache/apt/srcpkgcache.bin',
  'var/lib/apt/lists',
  'var/log',
];

/** What the image sets besides the root filesystem. */
const IMAGE_CHANGES = [
  'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  'ENV LANG=C.UTF-8',
  'WORKDIR /workspace',
  'USER 1000:1000',
  'CMD ["/bin/bash"]',
];

/** Where and what debootstrap fetches. */
export interface DebianSource {
  readonly mirror: string;
  readonly suite: string;
}

/** What ensureBaseImage did. */
export interface BaseImageResult {
  readonly image: string;
  /** 'present': nothing to do; 'imported': from the cached tarball; 'built': debootstrap, then imported. */
  readonly action: 'present' | 'imported' | 'built';
  readonly tarball: string | null;
  readonly seconds: number;
}

export interface BaseImageOptions {
  readonly image?: string;
  readonly dockerHost?: string;
  readonly dockerPath?: string;
  readonly cacheDir?: string;
  /** Default: the host's apt mirror and release (detectDebianSource). */
  readonly source?: DebianSource;
  /** Rebuild the tarball and re-import even if both exist. */
  readonly force?: boolean;
  /** Progress lines for a human ("debootstrap bookworm from …"). */
  readonly progress?: (line: string) => void;
}

/**
 * The Debian mirror and release the host's apt uses: the first `deb` source for the host's codename in
 * /etc/apt/sources.list.d/*.sources (deb822) or /etc/apt/sources.list, else deb.debian.org.
 */
export async function detectDebianSource(options: { etc?: string } = {}): Promise<DebianSource> {
  const etc = options.etc ?? '/etc';
  const osRelease = await readFile(posix.join(etc, 'os-release'), 'utf8').catch(() => '');
  const suite = /^VERSION_CODENAME=["']?([a-z]+)/m.exec(osRelease)?.[1];
  if (suite === undefined) {
    throw new UnavailableError(
      'cannot tell the Debian release of this host (/etc/os-release has no VERSION_CODENAME): building the base image needs a Debian host',
    );
  }
  const texts: string[] = [];
  const listDir = posix.join(etc, 'apt/sources.list.d');
  const names = await readdir(listDir).catch(() => [] as string[]);
  for (const name of names.sort()) {
    if (name.endsWith('.sources') || name.endsWith('.list')) {
      texts.push(await readFile(posix.join(listDir, name), 'utf8').catch(() => ''));
    }
  }
  texts.push(await readFile(posix.join(etc, 'apt/sources.list'), 'utf8').catch(() => ''));
  const mirror = findMirror(texts, suite) ?? DEFAULT_MIRROR;
  return { mirror, suite };
}

/** The first Debian archive URI offering `suite` (not -security/-updates) in deb822 or one-line sources. */
export function findMirror(texts: readonly string[], suite: string): string | undefined {
  for (const text of texts) {
    // deb822 stanzas: blank-line separated `Key: value` blocks.
    for (const stanza of text.split(/\n\s*\n/)) {
      const field = (key: string): string | undefined =>
        new RegExp(`^${key}:\\s*(.+)$`, 'mi').exec(stanza)?.[1]?.trim();
      const types = field('Types');
      const uris = field('URIs');
      const suites = field('Suites');
      if (types === undefined || uris === undefined || suites === undefined) continue;
      if (!types.split(/\s+/).includes('deb') || !suites.split(/\s+/).includes(suite)) continue;
      const uri = uris.split(/\s+/).find((u) => /^https?:\/\//.test(u));
      if (uri !== undefined) return uri.replace(/\/+$/, '');
    }
    // One-line format: `deb [options] URI suite components…`.
    for (const line of text.split('\n')) {
      const match = /^deb\s+(?:\[[^\]]*\]\s+)?(https?:\/\/\S+)\s+(\S+)\s/.exec(line.trim() + ' ');
      if (match !== null && match[2] === suite) return (match[1] ?? '').replace(/\/+$/, '');
    }
  }
  return undefined;
}

/** The cached tarball's path for a release. */
export function baseTarballPath(cacheDir: string, suite: string): string {
  return posix.join(cacheDir, `agentfense-base-${suite}-${process.arch}.tar`);
}

/** Makes sure `image` exists in the engine: nothing, an import of the cached tarball, or a full build. */
export async function ensureBaseImage(options: BaseImageOptions = {}): Promise<BaseImageResult> {
  const started = performance.now();
  const image = options.image ?? DEFAULT_IMAGE;
  const progress = options.progress ?? (() => undefined);
  const cli = await createDockerCli({
    ...(options.dockerPath === undefined ? {} : { dockerPath: options.dockerPath }),
    ...(options.dockerHost === undefined ? {} : { dockerHost: options.dockerHost }),
  });
  const seconds = (): number => Math.round((performance.now() - started) / 100) / 10;
  if (options.force !== true) {
    const present = await runDocker(cli, ['image', 'inspect', '--format', '{{.Id}}', image], {
      timeoutMs: 30_000,
    });
    if (!present.failed) return { image, action: 'present', tarball: null, seconds: seconds() };
    if (!/No such image/i.test(present.stderr)) {
      throw engineError(present.stderr, { action: 'looking for the base image', cli, image });
    }
  }
  const source = options.source ?? (await detectDebianSource());
  const cacheDir = options.cacheDir ?? DEFAULT_IMAGE_CACHE_DIR;
  const tarball = baseTarballPath(cacheDir, source.suite);
  const cached = options.force !== true && (await exists(tarball));
  if (!cached) {
    progress(
      `building the base root filesystem: debootstrap --variant=minbase ${source.suite} from ${source.mirror}`,
    );
    await buildBaseTarball({ tarball, source, cacheDir });
  }
  progress(`importing ${tarball} as ${image}`);
  const imported = await runDocker(
    cli,
    [
      'import',
      ...IMAGE_CHANGES.flatMap((change) => ['--change', change]),
      '--change',
      `LABEL io.agentfense.base=debian-${source.suite}-minbase`,
      '--message',
      `AgentFense base image: Debian ${source.suite} minbase`,
      tarball,
      image,
    ],
    { timeoutMs: IMPORT_TIMEOUT_MS },
  );
  if (imported.failed) throw engineError(imported.stderr, { action: 'importing the base image', cli, image });
  return { image, action: cached ? 'imported' : 'built', tarball, seconds: seconds() };
}

/**
 * debootstrap → trim → add the sandbox user → tar, written atomically to `tarball`. Needs root and the
 * `debootstrap` package; the work directory is removed whatever happens.
 */
export async function buildBaseTarball(options: {
  tarball: string;
  source: DebianSource;
  cacheDir: string;
}): Promise<void> {
  if (process.getuid?.() !== 0)
    throw new UnavailableError('building the base image needs root (debootstrap)');
  const debootstrap = (await exists('/usr/sbin/debootstrap', constants.X_OK))
    ? '/usr/sbin/debootstrap'
    : undefined;
  if (debootstrap === undefined) {
    throw new UnavailableError('debootstrap is not installed: install it with `apt-get install debootstrap`');
  }
  await mkdir(options.cacheDir, { recursive: true });
  const work = await mkdtemp(posix.join(options.cacheDir, 'build-'));
  const rootfs = posix.join(work, 'rootfs');
  const log = posix.join(options.cacheDir, 'debootstrap.log');
  try {
    const result = await execa(
      debootstrap,
      ['--variant=minbase', '--components=main', options.source.suite, rootfs, options.source.mirror],
      {
        reject: false,
        all: true,
        stdin: 'ignore',
        timeout: DEBOOTSTRAP_TIMEOUT_MS,
        env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8' },
        extendEnv: false,
      },
    );
    await appendFile(log, result.all);
    if (result.failed) {
      const tail = result.all.split('\n').filter(Boolean).slice(-5).join('\n');
      throw new UnavailableError(
        `debootstrap of ${options.source.suite} from ${options.source.mirror} failed (log: ${log}): ${tail}`,
      );
    }
    await unmountBelow(rootfs);
    for (const path of TRIM) {
      const full = posix.join(rootfs, path);
      const entries = await readdir(full).catch(() => null);
      if (entries === null) await rm(full, { force: true });
      else for (const entry of entries) await rm(posix.join(full, entry), { recursive: true, force: true });
    }
    await addSandboxUser(rootfs);
    const partial = `${options.tarball}.partial`;
    const tar = await execa('tar', ['--numeric-owner', '--xattrs', '-C', rootfs, '-cf', partial, '.'], {
      reject: false,
      stdin: 'ignore',
    });
    if (tar.failed) throw new InternalError(`packing the base root filesystem failed: ${tar.stderr}`);
    await rename(partial, options.tarball);
  } finally {
    await removeWork(work);
  }
}

/** Removes the work directory, but never a tree with a mount still inside it (debootstrap mounts proc, sys). */
async function removeWork(work: string): Promise<void> {
  await unmountBelow(work);
  if ((await unmountBelow(work)).length > 0) {
    throw new InternalError(`mounts remain under ${work} after unmounting them; not removing it`);
  }
  await rm(work, { recursive: true, force: true });
}

/** The sandbox user (uid/gid 1000, `agent`) with its home, so `id -un` and tools that want a passwd entry work. */
async function addSandboxUser(rootfs: string): Promise<void> {
  const has = async (file: string, prefix: string): Promise<boolean> =>
    (await readFile(posix.join(rootfs, file), 'utf8')).split('\n').some((l) => l.startsWith(prefix));
  if (!(await has('etc/passwd', 'agent:'))) {
    await appendFile(
      posix.join(rootfs, 'etc/passwd'),
      'agent:x:1000:1000:AgentFense sandbox:/home/agent:/bin/bash\n',
    );
  }
  if (!(await has('etc/group', 'agent:')))
    await appendFile(posix.join(rootfs, 'etc/group'), 'agent:x:1000:\n');
  if (!(await has('etc/shadow', 'agent:')))
    await appendFile(posix.join(rootfs, 'etc/shadow'), 'agent:*:19000:0:99999:7:::\n');
  await mkdir(posix.join(rootfs, 'home/agent'), { recursive: true, mode: 0o755 });
  await execa('chown', ['1000:1000', posix.join(rootfs, 'home/agent')]);
  await mkdir(posix.join(rootfs, 'workspace'), { recursive: true, mode: 0o755 });
}

async function exists(path: string, mode = constants.F_OK): Promise<boolean> {
  try {
    await access(path, mode);
    return (await stat(path)).size >= 0;
  } catch {
    return false; // absent or not accessible: treated as missing
  }
}
