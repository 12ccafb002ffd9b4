// Read-only files a sandbox is given (RuntimeStartOptions.files): its CA bundle when it has secrets
// (docs/secrets.md). The runtime writes them under `<stateDir>/docker/files-<uuid>/` (root's, 0700; each
// file root's, 0444) and the container binds each read-only at its destination. The engine mounts them
// as root, so the agent needs no way into the directory, and a bind is fixed at creation: a sandbox
// with files gets a fresh container, never a pooled one (runtime.ts). The engine makes a missing mount
// point (an image without /etc/ssl/certs) in the container's own layer, under the read-only image.
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { validateSandboxFiles } from '@agentfense/protocol';
import type { SandboxFile } from '@agentfense/protocol';
import { LAUNCHER_DIR, WORKSPACE_DIR } from '../exec/args.js';

const FILES_PREFIX = 'files-';

/**
 * Where the container mounts something of its own: a file there would hide it (or the engine refuses a
 * second mount at one point). /proc, /sys and /dev are the kernel's and the engine's.
 */
const RESERVED = [WORKSPACE_DIR, LAUNCHER_DIR, '/proc', '/sys', '/dev'];

/** A bind of one file into the container (DockerRunSpec.files). */
export interface FileBind {
  readonly source: string;
  readonly dest: string;
}

/** The files of one start, written; `release()` removes them (after the container is gone). */
export interface WrittenFiles {
  readonly binds: readonly FileBind[];
  release(): Promise<void>;
}

/** Throws unless the files can be given to a container (see validateSandboxFiles). */
export function checkFiles(files: readonly SandboxFile[]): readonly SandboxFile[] {
  return validateSandboxFiles(files, RESERVED);
}

/**
 * Writes `files` into a directory of this start's own under `scratchDir` (a replacement instance of the
 * same sandbox has another, so one's stop never removes the other's).
 */
export async function writeFiles(scratchDir: string, files: readonly SandboxFile[]): Promise<WrittenFiles> {
  const dir = posix.join(scratchDir, `${FILES_PREFIX}${randomUUID()}`);
  const release = (): Promise<void> => rm(dir, { recursive: true, force: true });
  try {
    await mkdir(scratchDir, { recursive: true, mode: 0o700 });
    await mkdir(dir, { mode: 0o700 });
    const binds: FileBind[] = [];
    for (const [i, file] of files.entries()) {
      const source = posix.join(dir, String(i));
      await writeFile(source, file.content, { mode: 0o444, flag: 'wx' });
      binds.push({ source, dest: file.dest });
    }
    return { binds, release };
  } catch (err) {
    await release();
    throw err;
  }
}

/** Removes what a crashed control plane left of files in a sandbox's docker scratch dir. */
export async function clearFiles(scratchDir: string): Promise<void> {
  for (const entry of await readdir(scratchDir).catch(() => [] as string[])) {
    if (entry.startsWith(FILES_PREFIX))
      await rm(posix.join(scratchDir, entry), { recursive: true, force: true });
  }
}
