// Builds packages/control/dist/peercred.node from native/peercred.c (part of `pnpm build`): SO_PEERCRED,
// which the run helper (src/cli/run-helper/) checks on every connection and Node does not expose.
// Against Node-API's headers of the running node (they ship with node: <prefix>/include/node). Skipped
// when the addon is newer than its source.
import { execFileSync } from 'node:child_process';
import { mkdirSync, renameSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'native', 'peercred.c');
const output = join(root, 'dist', 'peercred.node');
const headers = join(dirname(process.execPath), '..', 'include', 'node');

const mtime = (path) => statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? -1;

if (mtime(output) < mtime(source) || process.argv.includes('--force')) {
  mkdirSync(dirname(output), { recursive: true });
  const tmp = `${output}.${process.pid}.tmp`;
  const cc = process.env.CC ?? 'cc';
  try {
    execFileSync(
      cc,
      ['-O2', '-Wall', '-Wextra', '-Werror', '-shared', '-fPIC', '-I', headers, '-o', tmp, source],
      { stdio: 'inherit' },
    );
  } catch (err) {
    console.error(
      `build-peercred: \`${cc} -shared\` failed: it needs a C compiler and node's headers in ${headers} (Debian: gcc; \`bash scripts/setup\` installs it)`,
    );
    throw err;
  }
  renameSync(tmp, output); // atomic: a running helper keeps the file it loaded
}
