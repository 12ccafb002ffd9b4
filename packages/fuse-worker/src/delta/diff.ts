// The diff view of a change set: unified diffs of text files, a list of binary ones.
import { constants } from 'node:fs';

import { quotePath } from '@agentfense/protocol';
import type { HostDir } from '../host/host-dir.js';
import { Yielder } from '../host/yielder.js';
import type { DeltaChange } from './changes.js';
import type { DeltaContext } from './context.js';
import type { DeltaDiff } from './types.js';
import { unifiedDiff } from './unified-diff.js';

/** Files larger than this are listed as binary rather than diffed. */
const MAX_TEXT_BYTES = 8 * 1024 * 1024;
/** Like git: a NUL byte in the first 8000 bytes makes a file binary. */
const SNIFF_BYTES = 8000;

/** One changed file's part of a diff: its unified diff text, or its path when it is binary. */
export type DiffItem = { readonly text: string } | { readonly binary: string };

/**
 * Diffs each regular-file change against the codebase's current version (what a commit would replace),
 * one file at a time (a diff of 200k files is never one string in memory here). Everything else a commit
 * writes shows too, in git's extended headers: a mode change (`old mode`/`new mode`, directories
 * included), a new file's mode unless it is 0644 (`new file mode`), and symlinks as their target's text.
 * Special files are not text and are left out.
 */
export async function* diffItems(
  ctx: DeltaContext,
  changes: readonly DeltaChange[],
): AsyncGenerator<DiffItem> {
  const yielder = new Yielder();
  for (const change of changes) {
    await yielder.maybe();
    const name = change.entry.path.slice(1);
    const header = modeHeader(change);
    const isLink =
      change.upperType === 'symlink' || (change.base?.exists === true && change.base.type === 'symlink');
    if (isLink && change.upperType !== 'file') {
      const text = await symlinkDiff(ctx, change, name);
      if (header !== '' || text !== '') yield { text: `${header}${text}` };
      continue;
    }
    const isFile = change.upperType === 'file' || (change.upperType === null && change.entry.type === 'file');
    if (!isFile) {
      if (header !== '') yield { text: header };
      continue;
    }
    const oldText = change.entry.kind === 'added' ? '' : await readText(ctx.codebase, change.rel);
    const newText = change.upperType === 'file' ? await readText(change.from ?? ctx.upper, change.rel) : '';
    if (oldText === null || newText === null) {
      if (header !== '') yield { text: header };
      yield { binary: change.entry.path };
      continue;
    }
    const text = unifiedDiff({
      oldText,
      newText,
      // Header names quoted as git does when they hold control characters: the diff is printed on terminals.
      oldName: change.entry.kind === 'added' ? '/dev/null' : quotePath(`a/${name}`),
      newName: change.entry.kind === 'deleted' ? '/dev/null' : quotePath(`b/${name}`),
    });
    if (header !== '' || text !== '') yield { text: `${header}${text}` };
  }
}

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;

/** git's extended header for what a commit does to a mode, '' when there is nothing to show. */
function modeHeader(change: DeltaChange): string {
  const { kind, mode, oldMode, type, path } = change.entry;
  if (mode === undefined) return '';
  const bits = type === 'directory' ? S_IFDIR : S_IFREG;
  const oldBits = change.base?.exists === true && change.base.type === 'directory' ? S_IFDIR : S_IFREG;
  const git = gitLine(path.slice(1));
  if (kind === 'modified' && oldMode !== undefined && (oldMode !== mode || oldBits !== bits)) {
    return `${git}old mode ${octal(oldBits | oldMode)}\nnew mode ${octal(bits | mode)}\n`;
  }
  if (kind === 'added' && type === 'file' && mode !== 0o644)
    return `${git}new file mode ${octal(bits | mode)}\n`;
  return '';
}

/** A symlink's change as git shows it: its target as a one-line text without a final newline. */
async function symlinkDiff(ctx: DeltaContext, change: DeltaChange, name: string): Promise<string> {
  const wasLink = change.base?.exists === true && change.base.type === 'symlink';
  const oldTarget = wasLink ? await ctx.codebase.readlink(change.rel).catch(() => null) : null;
  const newTarget = change.upperType === 'symlink' ? (change.entry.target ?? null) : null;
  if (oldTarget === newTarget) return '';
  const text = unifiedDiff({
    oldText: oldTarget ?? '',
    newText: newTarget ?? '',
    oldName: oldTarget === null ? '/dev/null' : quotePath(`a/${name}`),
    newName: newTarget === null ? '/dev/null' : quotePath(`b/${name}`),
  });
  const created = oldTarget === null ? `new file mode ${octal(S_IFLNK)}\n` : '';
  const deleted = newTarget === null ? `deleted file mode ${octal(S_IFLNK)}\n` : '';
  return `${gitLine(name)}${created}${deleted}${text}`;
}

function gitLine(name: string): string {
  return `diff --git ${quotePath(`a/${name}`)} ${quotePath(`b/${name}`)}\n`;
}

function octal(mode: number): string {
  return mode.toString(8).padStart(6, '0');
}

/** The whole diff in one piece (tests and small deltas). */
export async function buildDiff(ctx: DeltaContext, changes: readonly DeltaChange[]): Promise<DeltaDiff> {
  let diff = '';
  const binary: string[] = [];
  for await (const item of diffItems(ctx, changes)) {
    if ('binary' in item) binary.push(item.binary);
    else diff += item.text;
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
