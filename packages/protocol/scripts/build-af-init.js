// Builds the static launcher packages/protocol/dist/af-init from native/af-init.c (part of `pnpm build`).
// Static so that it runs in any sandbox image: glibc, musl or none. Skipped when the binary is newer than
// its source, so a build without changes costs nothing.
import { execFileSync } from 'node:child_process';
import { mkdirSync, renameSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'native', 'af-init.c');
const output = join(root, 'dist', 'af-init');

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
      `build-af-init: \`${cc} -static\` failed: install a C compiler and a static libc (Debian: gcc libc6-dev; \`bash scripts/setup\` does it)`,
    );
    throw err;
  }
  renameSync(tmp, output); // atomic: a running sandbox's bind of the old binary stays intact
}
