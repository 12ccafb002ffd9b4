// Builds one static C program of the repository (af-init, af-walk: `pnpm build` runs each package's
// script, which calls this). Static so that it runs anywhere it is bound or started: any sandbox image
// (glibc, musl or none) for af-init, any host for af-walk. Skipped when the binary is newer than its
// source, so a build without changes costs nothing; `--force` on the caller's command line rebuilds.
import { execFileSync } from 'node:child_process';
import { mkdirSync, renameSync, statSync } from 'node:fs';
import { basename, dirname } from 'node:path';

function mtime(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return -1;
  }
}

/**
 * Compiles `source` (or `sources`) into `output` (`-O2 -Wall -Wextra -Werror -static`) unless `output` is
 * newer than each of them and of `includes` (their own headers).
 */
export function buildStaticC({
  source,
  sources = [source],
  includes = [],
  output,
  force = process.argv.includes('--force'),
}) {
  if (!force && [...sources, ...includes].every((input) => mtime(output) >= mtime(input))) return;
  mkdirSync(dirname(output), { recursive: true });
  const tmp = `${output}.${process.pid}.tmp`;
  const cc = process.env.CC ?? 'cc';
  try {
    execFileSync(cc, ['-O2', '-Wall', '-Wextra', '-Werror', '-static', '-o', tmp, ...sources], {
      stdio: 'inherit',
    });
  } catch (err) {
    console.error(
      `build ${basename(output)}: \`${cc} -static\` failed: install a C compiler and a static libc (Debian: gcc libc6-dev; \`bash scripts/setup\` does it)`,
    );
    throw err;
  }
  renameSync(tmp, output); // atomic: a running sandbox's bind of the old binary stays intact
}
