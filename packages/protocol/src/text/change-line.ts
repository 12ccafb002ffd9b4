// One line of a change list, as the CLI and the MCP tools print it: the mark (A/M/D), the path, and what
// else a commit does to the entry besides its content — a mode change, a new file's unusual mode, a
// symlink's target — so a review shows everything the commit applies.
import type { ChangeEntry } from '../delta-types.js';
import { quotePath } from './terminal.js';

const MARK = { added: 'A', modified: 'M', deleted: 'D' } as const;

/** The modes a change list does not spell out for a new entry: a file's 0644, a directory's 0755. */
const USUAL_MODE = { file: 0o644, directory: 0o755 } as const;

/** `M /run.sh (mode 644 -> 755)`, `A /out/ (mode 777)`, `A /ln -> target`; paths quoted when needed. */
export function changeLine(change: ChangeEntry): string {
  const path = quotePath(`${change.path}${change.type === 'directory' ? '/' : ''}`);
  const target = change.target === undefined ? '' : ` -> ${quotePath(change.target)}`;
  return `${MARK[change.kind]} ${path}${target}${modeNote(change)}`;
}

function modeNote(change: ChangeEntry): string {
  const { mode, oldMode } = change;
  if (mode === undefined) return '';
  if (oldMode !== undefined) return oldMode === mode ? '' : ` (mode ${octal(oldMode)} -> ${octal(mode)})`;
  const usual = change.type === 'file' || change.type === 'directory' ? USUAL_MODE[change.type] : undefined;
  return mode === usual ? '' : ` (mode ${octal(mode)})`;
}

function octal(mode: number): string {
  return mode.toString(8).padStart(3, '0');
}
