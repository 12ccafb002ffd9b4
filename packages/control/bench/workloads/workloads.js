// The workloads: an agent's everyday write-path work, run in order in one round of one target. Each is
// bash run in the write area $W with the codebase at $CB (environment variables: the scripts are constants
// and never hold a path). `prep` and `after` run untimed in commands of their own; `run` is timed inside
// its command (bash's $EPOCHREALTIME around it), so process and sandbox start-up are not in the figure.
// `gate`: the workload is one of those whose target is at most 2x native.

/** npm without its network habits: the cache is filled at set-up, nothing may reach the registry. */
const NPM_CI =
  'npm ci --offline --cache "$NPM_CACHE" --no-audit --no-fund --no-update-notifier --loglevel=error --logs-max=0';

export const WORKLOADS = [
  // First: the first `git status` in a fresh sandbox (a fresh fuse-overlayfs mount) of a checkout that is
  // part of the codebase, owned by a developer's uid (1000, the fixture's). Root runs it natively and
  // through fuse-overlayfs, hence safe.directory; the sandbox user is uid 1000 and owns what it sees.
  {
    key: 'status-checkout',
    name: 'git status, codebase checkout (first)',
    run: 'git -c "safe.directory=*" -C "$CB/checkout" status --porcelain',
  },
  // The owner is not restored (root would chown every file, the sandbox user cannot): the same work on
  // every target.
  {
    key: 'tar',
    name: 'tar -xf stdlib',
    prep: 'mkdir py',
    run: 'tar -xf "$CB/stdlib.tar" -C py --no-same-owner',
    gate: true,
  },
  { key: 'find', name: 'find (the extracted tree)', run: 'find py' },
  { key: 'grep', name: 'grep -r (the extracted tree)', run: "grep -r -e 'def __init__' py" },
  { key: 'cp', name: 'cp -a (the extracted tree)', run: 'cp -a py py-copy' },
  // The rename of a directory holding every file of the tree (the copy made above).
  { key: 'mv', name: 'mv (a directory of the tree)', run: 'mv py-copy py-moved', after: 'rm -rf py-moved' },
  { key: 'rm', name: 'rm -rf (the extracted tree)', run: 'rm -rf py', gate: true },
  // --no-hardlinks: natively a local clone would hard-link the objects, which a mount's write area cannot
  // do from the codebase (another filesystem); every target copies them.
  {
    key: 'clone',
    name: 'git clone (local repository)',
    run: 'git clone -q --no-hardlinks "$CB/repo" clone',
    gate: true,
  },
  { key: 'status-clone', name: 'git status (the clone)', run: 'git -C clone status --porcelain' },
  { key: 'rm-clone', name: 'rm -rf (the clone)', run: 'rm -rf clone', gate: true },
  {
    key: 'npm',
    name: 'npm ci --offline',
    prep: 'mkdir npm && cp "$CB/npm/package.json" "$CB/npm/package-lock.json" npm/',
    run: `cd npm && ${NPM_CI}`,
    gate: true,
  },
  {
    key: 'tsc',
    name: 'tsc -b (TS project)',
    prep: 'cp -a "$CB/tsproj" ts',
    run: 'node "$CB/tools/typescript/bin/tsc" -b ts',
  },
];

/**
 * The C build, on request only (BENCH_MAKE=1): ~200 compiler runs cost ~30 s of CPU per target and
 * round, minutes on a loaded 2-core machine, and the compiler's time hides the filesystem's.
 */
export const MAKE_WORKLOAD = {
  key: 'make',
  name: 'make -j2 (C project)',
  prep: 'cp -a "$CB/cproj" c',
  run: 'make -s -j2 -C c',
};

/** The environment of every workload command on every target: the same PATH, locale and HOME. */
export function workloadEnv({ codebase, work, npmCache = `${codebase}/npm-cache` }) {
  return {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    LC_ALL: 'C',
    HOME: work,
    CB: codebase,
    W: work,
    NPM_CACHE: npmCache,
  };
}

/** An untimed snippet (prep, after) as a script. */
export const plainScript = (snippet) => `set -euo pipefail\ncd "$W"\n${snippet}\n`;

/** The timed script: the snippet's output is dropped, the two clock readings are printed. */
export const timedScript = (snippet) =>
  `set -euo pipefail\ncd "$W"\ns=$EPOCHREALTIME\n{\n${snippet}\n} >/dev/null\ne=$EPOCHREALTIME\necho "AF_TIMED $s $e"\n`;

/** Milliseconds between the clock readings a timed script printed. */
export function timedMs(stdout) {
  const match = /^AF_TIMED (\d+\.\d+) (\d+\.\d+)$/m.exec(stdout);
  if (match === null) throw new Error(`no timing in the output: ${stdout.slice(-500)}`);
  return (Number(match[2]) - Number(match[1])) * 1000;
}
