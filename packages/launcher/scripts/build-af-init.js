// Builds the static launcher packages/launcher/dist/af-init from native/af-init*.c (part of `pnpm build`;
// scripts/build-static-c.js says how): af-init.c the loop and the commands, af-init-frames.c the frames to
// the host, af-init-child.c a command's way from fork to execve.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildStaticC } from '../../../scripts/build-static-c.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const native = (name) => join(root, 'native', name);
buildStaticC({
  sources: ['af-init.c', 'af-init-frames.c', 'af-init-child.c'].map(native),
  includes: [native('af-init.h')],
  output: join(root, 'dist', 'af-init'),
});
