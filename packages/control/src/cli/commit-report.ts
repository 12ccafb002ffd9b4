// What a commit did, for people: `run --commit` and `sandbox commit` print it the same way (on stderr).
import { quotePath } from '@agentfense/protocol/core';
import type { CommitResult } from '@agentfense/protocol';
import type { CliIo } from './io.js';

/** Status when a commit found conflicts (nothing conflicting was written). */
export const EXIT_CONFLICT = 3;

/** Prints how many changes went to `dir`, then each conflict, skipped entry and entry written with a change. */
export function reportCommit(io: CliIo, commit: CommitResult, dir: string): void {
  io.stderr.write(`agentfense: committed ${commit.applied.length} change(s) to ${dir}\n`);
  for (const conflict of commit.conflicts) {
    io.stderr.write(`agentfense: conflict, not written: ${quotePath(conflict.path)}: ${conflict.reason}\n`);
  }
  for (const note of commit.skipped ?? []) {
    io.stderr.write(`agentfense: skipped, not written: ${quotePath(note.path)}: ${note.reason}\n`);
  }
  for (const note of commit.changed ?? []) {
    io.stderr.write(`agentfense: written with a change: ${quotePath(note.path)}: ${note.reason}\n`);
  }
}
