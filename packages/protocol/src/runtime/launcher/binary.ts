// Where the built af-init binary is: packages/protocol/dist/af-init, built by `pnpm build`
// (packages/protocol/scripts/build-af-init.js). This file sits three directories below the package root
// both as source (src/runtime/launcher) and built (dist/runtime/launcher).
import { accessSync, constants } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { UnavailableError } from '../../errors.js';

/** The host path of the static af-init binary; never passed into a sandbox's argv or environment. */
export const AF_INIT_PATH = fileURLToPath(new URL('../../../dist/af-init', import.meta.url));

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
