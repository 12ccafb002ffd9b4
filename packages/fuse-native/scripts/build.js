// Builds packages/fuse-native/dist/fuse.node from native/*.c (part of `pnpm build`): the low-level libfuse 3
// binding and its host I/O (src/addon.ts loads it). libfuse's flags come from pkg-config; its headers are
// included with -isystem, like node's, so that only warnings in our own code count (-Werror).
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildAddon } from '../../../scripts/build-addon.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const native = join(root, 'native');
const files = readdirSync(native).sort();

/** `pkg-config <args> fuse3` split into words; fails with the Debian packages to install. */
function fuse3(args) {
  try {
    return execFileSync('pkg-config', [...args, 'fuse3'], { encoding: 'utf8' })
      .trim()
      .split(/\s+/)
      .filter(Boolean);
  } catch (err) {
    console.error(
      'build fuse.node: pkg-config cannot find libfuse 3 (>= 3.10); Debian: apt-get install libfuse3-dev pkg-config (`bash scripts/setup` does it)',
    );
    throw err;
  }
}

fuse3(['--atleast-version=3.10']);
buildAddon({
  sources: files.filter((f) => f.endsWith('.c')).map((f) => join(native, f)),
  includes: files.filter((f) => f.endsWith('.h')).map((f) => join(native, f)),
  output: join(root, 'dist', 'fuse.node'),
  // -fvisibility=hidden: the files share functions, the addon exports only its Node-API entry point.
  cflags: ['-fvisibility=hidden', ...fuse3(['--cflags']).map((f) => f.replace(/^-I/, '-isystem'))],
  libs: fuse3(['--libs']),
  werror: true,
});
