// Read-only files a sandbox is given (RuntimeStartOptions.files): today its CA bundle, when it has
// secrets (docs/secrets.md). Their contents are public (certificates), but only root may change them:
// written under F = <runDir>/<sandboxId>.files, root's with the sandbox's group and mode 0710 like the
// relay (run-dir.ts), each file 0444, and bound read-only at its destination inside.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { validateSandboxFiles } from '@agentfense/protocol';
import type { SystemMount } from '../exec/args.js';
import { closeToOthers, prepareRunDir } from './run-dir.js';

function filesDir(runDir: string, sandboxId: string): string {
  return posix.join(runDir, `${sandboxId}.files`);
}

/** Writes the files; returns the mounts that bind them (after /etc's, so they may sit inside it). */
export async function writeSandboxFiles(options: {
  runDir: string;
  sandboxId: string;
  gid: number;
  files: readonly { readonly dest: string; readonly content: string }[];
}): Promise<SystemMount[]> {
  validateSandboxFiles(options.files);
  await clearSandboxFiles(options.runDir, options.sandboxId);
  if (options.files.length === 0) return [];
  const dir = filesDir(options.runDir, options.sandboxId);
  await prepareRunDir(options.runDir);
  await mkdir(dir, { mode: 0o700 });
  await closeToOthers(dir, options.gid);
  const mounts: SystemMount[] = [];
  for (const [i, file] of options.files.entries()) {
    const source = posix.join(dir, String(i));
    await writeFile(source, file.content, { mode: 0o444 });
    mounts.push({ kind: 'ro-bind', source, dest: file.dest });
  }
  return mounts;
}

/** Removes the sandbox's files, if any. Idempotent. */
export async function clearSandboxFiles(runDir: string, sandboxId: string): Promise<void> {
  await rm(filesDir(runDir, sandboxId), { recursive: true, force: true });
}
