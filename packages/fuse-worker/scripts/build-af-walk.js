// Builds packages/fuse-worker/dist/af-walk from native/af-walk.c (part of `pnpm build`;
// scripts/build-static-c.js says how): the entry warm-up's walker (src/fs/entry-warmup.ts), a process of
// its own so that no thread of the worker ever waits inside a request on the worker's own mount.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildStaticC } from '../../../scripts/build-static-c.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
buildStaticC({ source: join(root, 'native', 'af-walk.c'), output: join(root, 'dist', 'af-walk') });
