// Builds packages/node-agent/dist/af-mountns from native/af-mountns.c (part of `pnpm build`;
// scripts/build-static-c.js says how): the helper that attaches a sandbox's view and launcher directory
// inside its container's mount namespace (setns needs a single-threaded process).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildStaticC } from '../../../scripts/build-static-c.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
buildStaticC({ source: join(root, 'native', 'af-mountns.c'), output: join(root, 'dist', 'af-mountns') });
