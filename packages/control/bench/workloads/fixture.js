// The codebase the workloads run against, built once and cached under the bench cache directory (outside
// the repository): the Python standard library as a tarball, a git repository of ~500 of its files to
// clone, a checkout committed inside the codebase, an npm project with a real lockfile and its npm cache
// (filled online at set-up; the measured `npm ci` is offline), a copy of the TypeScript compiler, and the
// generated TypeScript and C projects. Built in a directory of its own and renamed into place when
// complete, so a set-up that dies half-way leaves no half fixture behind.
import { createHash } from 'node:crypto';
import { copyFile, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { run } from './host.js';
import { NPM_PACKAGE, cProject, tsProject } from './sources.js';

/** Bump when the fixture's layout or content changes: the cache key holds it. */
const FIXTURE_VERSION = 3;
/** Files of the standard library committed to the repository that `git clone` clones. */
const REPO_FILES = 500;
/** File times before the commit, so git never finds an index "racily clean" (it would re-hash files). */
const PAST = '@1700000000';
/**
 * The owner of the checkout and of its index: a developer's own uid, as a checkout in a user's codebase
 * is (the sandbox user is uid 1000 inside and sees codebase files as its own, so git's index matches).
 */
const DEVELOPER = '1000:1000';
const NPM_QUIET = ['--no-audit', '--no-fund', '--no-update-notifier', '--logs-max=0'];
const GIT = [
  'git',
  '-c',
  'user.name=bench',
  '-c',
  'user.email=bench@localhost',
  '-c',
  'init.defaultBranch=main',
];

/** The newest /usr/lib/python3.N directory name. */
async function pythonLib() {
  const names = (await readdir('/usr/lib')).filter((n) => /^python3\.\d+$/.test(n));
  if (names.length === 0)
    throw new Error('no /usr/lib/python3.N: the fixture needs the Python standard library');
  return names.sort((a, b) => Number(a.split('.')[1]) - Number(b.split('.')[1])).at(-1);
}

/** Commits everything in `dir` as a new repository (file times set in the past first). */
async function commitAll(dir, message) {
  await run(['find', dir, '-exec', 'touch', '-h', '-d', PAST, '{}', '+']);
  await run([...GIT, '-C', dir, 'init', '-q']);
  await run([...GIT, '-C', dir, 'add', '-A']);
  await run([...GIT, '-C', dir, 'commit', '-q', '-m', message]);
  await run([...GIT, '-C', dir, 'gc', '-q']);
}

/**
 * Gives the checkout to DEVELOPER and records the new owner (and ctime) in its index, as a checkout the
 * developer made would hold: git compares both with each file's, and re-hashes a file whose differ.
 */
async function ownAsDeveloper(dir) {
  await run(['chown', '-R', DEVELOPER, dir]);
  await run([...GIT, '-c', 'safe.directory=*', '-C', dir, 'update-index', '-q', '--refresh']);
  await run(['chown', DEVELOPER, join(dir, '.git', 'index')]);
}

async function writeTree(root, files) {
  for (const [path, text] of files) {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), text);
  }
}

/**
 * The npm project, its lockfile and cache. The lockfile is resolved online, an online `npm ci` fills the
 * cache with everything `npm ci` asks for (`npm install` leaves out the metadata of packages whose lockfile
 * entry has no `resolved` URL), and an offline `npm ci` proves the cache complete before it is used.
 */
async function npmProject(codebase, scratch) {
  const project = join(codebase, 'npm');
  await mkdir(project);
  await mkdir(scratch);
  const manifest = `${JSON.stringify(NPM_PACKAGE, null, 2)}\n`;
  await writeFile(join(project, 'package.json'), manifest);
  await writeFile(join(scratch, 'package.json'), manifest);
  const npm = (...args) =>
    run(['npm', ...args, '--cache', join(codebase, 'npm-cache'), ...NPM_QUIET], { cwd: scratch });
  await npm('install', '--package-lock-only');
  await npm('ci');
  await rm(join(scratch, 'node_modules'), { recursive: true });
  await npm('ci', '--offline');
  await copyFile(join(scratch, 'package-lock.json'), join(project, 'package-lock.json'));
  // The compiler `tsc -b` runs, read from the codebase as a project's node_modules would be.
  await mkdir(join(codebase, 'tools'));
  await run(['cp', '-a', join(scratch, 'node_modules', 'typescript'), join(codebase, 'tools', 'typescript')]);
  await rm(scratch, { recursive: true, force: true });
  const lock = JSON.parse(await readFile(join(project, 'package-lock.json'), 'utf8'));
  return Object.keys(lock.packages).filter((k) => k.startsWith('node_modules/')).length;
}

async function build(dir, python) {
  const codebase = join(dir, 'codebase');
  await mkdir(codebase, { recursive: true });
  const tarball = join(codebase, 'stdlib.tar');
  const excluded = ['__pycache__', 'site-packages', 'dist-packages'].map((p) => `--exclude=${p}`);
  await run(['tar', '-cf', tarball, ...excluded, '-C', '/usr/lib', python]);
  const entries = (await run(['tar', '-tf', tarball])).split('\n').filter((l) => l !== '');
  const stdlibFiles = entries.filter((e) => !e.endsWith('/'));

  const checkout = join(codebase, 'checkout');
  await mkdir(checkout);
  await run(['tar', '-xf', tarball, '-C', checkout, '--no-same-owner']);
  await commitAll(checkout, 'the standard library');
  await ownAsDeveloper(checkout);

  // Evenly spread over the library, so the clone has its directory shape.
  const repo = join(codebase, 'repo');
  const step = Math.max(1, stdlibFiles.length / REPO_FILES);
  const picked = [];
  for (let i = 0; i < stdlibFiles.length && picked.length < REPO_FILES; i += step) {
    picked.push(stdlibFiles[Math.floor(i)]);
  }
  for (const path of picked) {
    await mkdir(dirname(join(repo, path)), { recursive: true });
    await copyFile(join(checkout, path), join(repo, path));
  }
  await commitAll(repo, 'part of the standard library');

  const packages = await npmProject(codebase, join(dir, 'npm-scratch'));
  const ts = tsProject();
  const c = cProject();
  await writeTree(join(codebase, 'tsproj'), ts);
  await writeTree(join(codebase, 'cproj'), c);
  return {
    python,
    stdlibFiles: stdlibFiles.length,
    stdlibDirs: entries.length - stdlibFiles.length,
    stdlibBytes: (await stat(tarball)).size,
    repoFiles: picked.length,
    npmPackages: packages,
    tsFiles: [...ts.keys()].filter((p) => p.endsWith('.ts')).length,
    cFiles: [...c.keys()].filter((p) => p.endsWith('.c')).length,
  };
}

/**
 * The fixture under `cacheDir` (built first when missing): { codebase, counts }. `log` reports the
 * set-up's progress (the first one downloads ~300 npm packages).
 */
export async function prepareFixture({ cacheDir, log }) {
  const python = await pythonLib();
  const key = createHash('sha256')
    .update(JSON.stringify({ FIXTURE_VERSION, python, NPM_PACKAGE, REPO_FILES }))
    .digest('hex')
    .slice(0, 12);
  const dir = join(cacheDir, `workloads-${key}`);
  const ready = join(dir, 'ready.json');
  const cached = await readFile(ready, 'utf8').catch(() => undefined);
  if (cached !== undefined) return { codebase: join(dir, 'codebase'), counts: JSON.parse(cached) };

  log(`building the fixture in ${dir} (once; npm downloads its packages) ...`);
  const partial = `${dir}.partial-${process.pid}`;
  await rm(partial, { recursive: true, force: true });
  try {
    const counts = await build(partial, python);
    await writeFile(join(partial, 'ready.json'), `${JSON.stringify(counts, null, 2)}\n`);
    await rm(dir, { recursive: true, force: true });
    await rename(partial, dir);
    // Fixtures of other keys (an older layout, another Python) are not used again.
    for (const name of await readdir(cacheDir)) {
      if (/^workloads-[0-9a-f]{12}$/.test(name) && join(cacheDir, name) !== dir) {
        await rm(join(cacheDir, name), { recursive: true, force: true });
      }
    }
    return { codebase: join(dir, 'codebase'), counts };
  } finally {
    await rm(partial, { recursive: true, force: true });
  }
}
