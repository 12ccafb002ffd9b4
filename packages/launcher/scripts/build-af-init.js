// Builds the static launcher packages/launcher/dist/af-init from native/af-init.c (part of `pnpm build`;
// scripts/build-static-c.js says how).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildStaticC } from '../../../scripts/build-static-c.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
buildStaticC({ source: join(root, 'native', 'af-init.c'), output: join(root, 'dist', 'af-init') });
