// Builds packages/control/dist/peercred.node from native/peercred.c (part of `pnpm build`): SO_PEERCRED,
// which the run helper (src/cli/run-helper/) checks on every connection and Node does not expose.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildAddon } from '../../../scripts/build-addon.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
buildAddon({ source: join(root, 'native', 'peercred.c'), output: join(root, 'dist', 'peercred.node') });
