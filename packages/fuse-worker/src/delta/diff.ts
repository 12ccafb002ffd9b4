// The diff view of a change set: unified diffs of text files, a list of binary ones.
import { constants } from 'node:fs';

import { quotePath } from '@agentfense/protocol';
import type { HostDir } from '../host/host-dir.js';
import type { DeltaChange } from './changes.js';
import type { DeltaContext } from './context.js';
import type { DeltaDiff } from './types.js';
import { unifiedDiff } from './unified-diff.js';

/** Files larger than this are listed as binary rather than diffed. */
const MAX_TEXT_BYTES = 8 * 1024 * 1024;
/** Like git: a NUL byte in the first 8000 bytes makes a file binary. */
const SNIFF_BYTES = 8000;

/**
 * Diffs each regular-file change against the codebase's current version (what a commit would replace).
 * Directories, symlinks and special files are not text and are left out.
 */
export async function buildDiff(ctx: DeltaContext, changes: readonly DeltaChange[]): Promise<DeltaDiff> {
  let diff = '';
  const binary: string[] = [];
  for (const change of changes) {
    const isFile = change.upperType === 'file' || (change.upperType === null && change.entry.type === 'file');
    if (!isFile) continue;
    const oldText = change.entry.kind === 'added' ? '' : await readText(ctx.lower, change.rel);
    const newText = change.upperType === 'file' ? await readText(ctx.upper, change.rel) : '';
    if (oldText === null || newText === null) {
      binary.push(change.entry.path);
      continue;
    }
    const name = change.entry.path.slice(1);
    diff += unifiedDiff({
      oldText,
      newText,
      // Header names quoted as git does when they hold control characters: the diff is printed on terminals.
      oldName: change.entry.kind === 'added' ? '/dev/null' : quotePath(`a/${name}`),
      newName: change.entry.kind === 'deleted' ? '/dev/null' : quotePath(`b/${name}`),
    });
  }
  return { diff, binary };
}

/** The file's text, '' if it is not a regular file any more, null if it is binary or too large. */
async function readText(dir: HostDir, rel: string): Promise<string | null> {
  const st = await dir.lstatOrNull(rel);
  if (st === null || !st.isFile()) return '';
  if (st.size > BigInt(MAX_TEXT_BYTES)) return null;
  const fh = await dir.open(rel, constants.O_RDONLY);
  try {
    const data = await fh.readFile();
    if (data.subarray(0, SNIFF_BYTES).includes(0)) return null;
    return data.toString('utf8');
  } finally {
    await fh.close();
  }
}
