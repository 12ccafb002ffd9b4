// Where the built af-init binary is: packages/launcher/dist/af-init, built by `pnpm build`
// (packages/launcher/scripts/build-af-init.js). Found through the package's own name, so the answer is
// the same from the TS source, from dist/ and from a bundle of another package (the CLI's esbuild bundle
// has its own import.meta.url).
import { accessSync, constants } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { UnavailableError } from '@agentfense/protocol';

/** The host path of the static af-init binary; never passed into a sandbox's argv or environment. */
export const AF_INIT_PATH = join(
  dirname(createRequire(import.meta.url).resolve('@agentfense/launcher/package.json')),
  'dist',
  'af-init',
);

/** AF_INIT_PATH if it is there and executable, else UnavailableError naming the fix. */
export function afInitPath(): string {
  try {
    accessSync(AF_INIT_PATH, constants.X_OK);
  } catch {
    throw new UnavailableError(
      `the sandbox launcher af-init is not built (${AF_INIT_PATH} is missing): run \`pnpm build\` (it needs cc and a static libc: \`bash scripts/setup\`)`,
    );
  }
  return AF_INIT_PATH;
}
