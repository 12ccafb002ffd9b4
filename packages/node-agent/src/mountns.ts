// Attaching a host directory inside a container's mount namespace through af-mountns (native/af-mountns.c:
// setns needs a single-threaded process). argv arrays only; the helper checks its arguments again.
import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { UnavailableError } from '@agentfense/protocol';

/** Where the sandbox sees its view, and af-init with its socket and the ready marker (names under /). */
export const WORKSPACE_NAME = 'workspace';
export const LAUNCHER_NAME = '.agentfense';

const HELPER_TIMEOUT_MS = 10_000;

/** The built helper (packages/node-agent/dist/af-mountns), found through the package's own name. */
export function afMountnsPath(): string {
  let root: string;
  try {
    root = dirname(createRequire(import.meta.url).resolve('@agentfense/node-agent/package.json'));
  } catch {
    root = join(dirname(fileURLToPath(import.meta.url)), '..');
  }
  const path = join(root, 'dist', 'af-mountns');
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new UnavailableError(`the node agent's mount helper is not built (${path}): run \`pnpm build\``);
  }
  return path;
}

function run(argv: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(afMountnsPath(), argv, { timeout: HELPER_TIMEOUT_MS }, (err, _stdout, stderr) => {
      if (err === null) resolve();
      else reject(new UnavailableError(stderr.trim() || `af-mountns failed: ${err.message}`));
    });
  });
}

/** Clones the host directory `source` and attaches it at /<name> in the mount namespace of `pid`. */
export function attachInContainer(options: {
  readonly pid: number;
  readonly source: string;
  readonly name: string;
  readonly readonly: boolean;
}): Promise<void> {
  const { pid, source, name } = options;
  return run(['mount', String(pid), source, name, options.readonly ? 'ro' : 'rw']);
}

/** Detaches /<name> in the mount namespace of `pid` (nothing there: no error). */
export function detachInContainer(options: { readonly pid: number; readonly name: string }): Promise<void> {
  return run(['umount', String(options.pid), options.name]);
}
