// Builds packages/fuse-worker/dist/af-walk from native/af-walk.c (part of `pnpm build`): the entry
// warm-up's walker (src/fs/entry-warmup.ts), a process of its own so that no thread of the worker ever
// waits inside a request on the worker's own mount. Static, as af-init. Skipped when the binary is newer
// than its source.
import { execFileSync } from 'node:child_process';
import { mkdirSync, renameSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'native', 'af-walk.c');
const output = join(root, 'dist', 'af-walk');

function mtime(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return -1;
  }
}

if (mtime(output) < mtime(source) || process.argv.includes('--force')) {
  mkdirSync(dirname(output), { recursive: true });
  const tmp = `${output}.${process.pid}.tmp`;
  const cc = process.env.CC ?? 'cc';
  try {
    execFileSync(cc, ['-O2', '-Wall', '-Wextra', '-Werror', '-static', '-o', tmp, source], {
      stdio: 'inherit',
    });
  } catch (err) {
    console.error(
      `build-af-walk: \`${cc} -static\` failed: install a C compiler and a static libc (Debian: gcc libc6-dev; \`bash scripts/setup\` does it)`,
    );
    throw err;
  }
  renameSync(tmp, output);
}
