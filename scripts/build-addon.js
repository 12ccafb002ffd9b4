// Builds one Node-API addon of the repository (the run helper's SO_PEERCRED, the network policy point's
// namespace sockets, the FUSE binding: each package's build script calls this) against the running node's
// Node-API headers (they ship with node: <prefix>/include/node). Skipped when the addon is newer than all
// its sources and headers; `--force` on the caller's command line rebuilds.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

// node_api.h: NodeSource's and the official builds ship it under <prefix>/include/node; Debian's own
// nodejs puts it in libnode-dev (/usr/include/node; scripts/setup installs that when it is missing).
const candidates = [
  join(dirname(process.execPath), '..', 'include', 'node'),
  ...(process.env.npm_config_nodedir ? [join(process.env.npm_config_nodedir, 'include', 'node')] : []),
  '/usr/include/node',
];

const mtime = (path) => statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? -1;

/**
 * Compiles `source` (or `sources`) into the addon `output` unless it is newer than each of them and of
 * `includes` (its own headers). `cflags` and `libs` come before and after the sources; `werror` turns warnings into errors
 * (the FUSE binding: its compiler is the one Debian pins, see packages/fuse-native/README.md).
 */
export function buildAddon({
  source,
  sources = [source],
  includes = [],
  output,
  cflags = [],
  libs = [],
  werror = false,
  force = process.argv.includes('--force'),
}) {
  if (!force && [...sources, ...includes].every((input) => mtime(output) >= mtime(input))) return;
  const headers = candidates.find((dir) => existsSync(join(dir, 'node_api.h'))) ?? candidates[0];
  mkdirSync(dirname(output), { recursive: true });
  const tmp = `${output}.${process.pid}.tmp`;
  const cc = process.env.CC ?? 'cc';
  try {
    execFileSync(
      cc,
      // No -Werror by default: a newer compiler may warn about something new, which must not fail a fresh
      // setup; -isystem: warnings inside node's headers are not ours.
      [
        ...['-O2', '-Wall', '-Wextra', ...(werror ? ['-Werror'] : []), '-shared', '-fPIC'],
        ...['-isystem', headers, ...cflags, '-o', tmp, ...sources, ...libs],
      ],
      { stdio: 'inherit' },
    );
  } catch (err) {
    console.error(
      `build ${basename(output)}: \`${cc} -shared\` failed: it needs a C compiler and node's headers (node_api.h, looked for in ${candidates.join(', ')}; Debian: gcc, libnode-dev; \`bash scripts/setup\` installs it)`,
    );
    throw err;
  }
  renameSync(tmp, output); // atomic: a running process keeps the file it loaded
}
