// Builds packages/control/dist/peercred.node from native/peercred.c (part of `pnpm build`): SO_PEERCRED,
// which the run helper (src/cli/run-helper/) checks on every connection and Node does not expose.
// Against Node-API's headers of the running node (they ship with node: <prefix>/include/node). Skipped
// when the addon is newer than its source.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'native', 'peercred.c');
const output = join(root, 'dist', 'peercred.node');
// node_api.h: NodeSource's and the official builds ship it under <prefix>/include/node; Debian's own
// nodejs puts it in libnode-dev (/usr/include/node; scripts/setup installs that when it is missing).
const candidates = [
  join(dirname(process.execPath), '..', 'include', 'node'),
  ...(process.env.npm_config_nodedir ? [join(process.env.npm_config_nodedir, 'include', 'node')] : []),
  '/usr/include/node',
];
const headers = candidates.find((dir) => existsSync(join(dir, 'node_api.h'))) ?? candidates[0];

const mtime = (path) => statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? -1;

if (mtime(output) < mtime(source) || process.argv.includes('--force')) {
  mkdirSync(dirname(output), { recursive: true });
  const tmp = `${output}.${process.pid}.tmp`;
  const cc = process.env.CC ?? 'cc';
  try {
    execFileSync(
      cc,
      // No -Werror: a newer compiler may warn about something new, which must not fail a fresh setup;
      // -isystem: warnings inside node's headers are not ours.
      ['-O2', '-Wall', '-Wextra', '-shared', '-fPIC', '-isystem', headers, '-o', tmp, source],
      { stdio: 'inherit' },
    );
  } catch (err) {
    console.error(
      `build-peercred: \`${cc} -shared\` failed: it needs a C compiler and node's headers (node_api.h, looked for in ${candidates.join(', ')}; Debian: gcc, libnode-dev; \`bash scripts/setup\` installs it)`,
    );
    throw err;
  }
  renameSync(tmp, output); // atomic: a running helper keeps the file it loaded
}
