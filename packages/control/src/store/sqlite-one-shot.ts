// The fast exit of `agentfense run` (cli/forget-one-shot.ts) in SQLite: the one-shot sandbox's record and
// its linked codebase's (when nothing else uses it) deleted in one IMMEDIATE transaction. `run` is local:
// its records are always in the data directory's SQLite file.
import type { Db } from './db.js';

export function forgetOneShotRecords(
  db: Db,
  ids: { readonly sandboxId: string; readonly codebaseId: string },
): void {
  db.transaction(() => {
    db.prepare('DELETE FROM sandboxes WHERE id = ?').run(ids.sandboxId);
    const codebase = db.prepare('SELECT kind FROM codebases WHERE id = ?').get(ids.codebaseId) as
      { kind: string } | undefined;
    const users = db
      .prepare('SELECT COUNT(*) AS n FROM sandboxes WHERE codebase_id = ?')
      .get(ids.codebaseId) as {
      n: number;
    };
    if (codebase?.kind === 'linked' && users.n === 0) {
      db.prepare('DELETE FROM codebases WHERE id = ?').run(ids.codebaseId);
    }
  }).immediate();
}
