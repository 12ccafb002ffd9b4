// syncfs(2) of the filesystem holding a directory, through coreutils' `sync -f` (Node has no syncfs).
// Why not fsync each file: on this project's machines an fsync of a small new file costs 2-3 ms even 64 at
// a time (2,000 files: 4.9 s), one syncfs after writing them 40-200 ms. A commit calls it once per batch
// of files before the delta lets go of their copies (commit.ts), so a power cut never loses both copies.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';

/** Where Debian and others put coreutils' sync (merged /usr or not). */
const CANDIDATES = ['/usr/bin/sync', '/bin/sync'];

let found: string | null | undefined;

/** The `sync` executable, or null when the host has none. */
function syncBinary(): string | null {
  found ??= CANDIDATES.find((path) => existsSync(path)) ?? null;
  return found;
}

/**
 * Flushes the filesystem that holds `dir` to stable storage: data and metadata of every file on it.
 * Resolves false, having done nothing, when the host has no `sync` executable (the caller logs that
 * durability is then the process-death kind only); rejects when the flush failed (an I/O error: what was
 * written may not be on disk). `dir` is opened by `sync` by path, which may name another directory by
 * now: that only flushes another filesystem, never writes anything.
 */
export function syncFilesystem(dir: string): Promise<boolean> {
  const binary = syncBinary();
  if (binary === null) return Promise.resolve(false);
  return new Promise((resolve, reject) => {
    execFile(binary, ['-f', '--', dir], { timeout: 0 }, (err, _stdout, stderr) => {
      if (err === null) resolve(true);
      else reject(new Error(`syncfs of ${dir} failed: ${stderr.trim() || err.message}`));
    });
  });
}
