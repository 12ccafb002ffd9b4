// Attack: flood the audit trail. Denied lookups of long hidden names, tens of thousands of them, grew a
// sandbox's audit.jsonl without bound (585 MB for 38,000), until `agentfense audit` failed reading it
// as one string; and a trail that is merely capped would let the flood evict the denial the operator
// needs to see. Defence: the trail rotates at a byte cap (audit.jsonl + audit.jsonl.1), similar denials
// (same op, errno, permission) past the first few of each second become one record with a count, and
// readers stream the files.
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import type { AuditEvent } from '@agentfense/protocol';
import { useCliScratch } from '../helpers/cli-scratch.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
const CAP = 64 * 1024;
const FLOOD = 20_000;

const dirs = useCliScratch('af-sec-audit-');

/** The CLI on this test's dirs.data directory (given before `--`: what follows it is the command's). */
function agentfense(args: string[]) {
  const end = args.includes('--') ? args.indexOf('--') : args.length;
  const argv = [...args.slice(0, end), '--data', dirs.data, ...args.slice(end)];
  return execa(process.execPath, [bin, ...argv], {
    reject: false,
    env: { AGENTFENSE_AUDIT_MAX_BYTES: String(CAP) },
  });
}

/** Every audit.jsonl* below `dir`. */
async function auditFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true });
  return entries.filter((e) => /(^|\/)audit\.jsonl(\.1)?$/.test(e)).map((e) => join(dir, e));
}

describe('a flood of denials', () => {
  it('keeps the trail within its cap, keeps the earlier denial, and counts every one', async () => {
    const long = 'x'.repeat(200);
    const run = await agentfense([
      'run',
      dirs.repo,
      '--keep',
      '--json',
      '--timeout',
      '240',
      '--',
      'sh',
      '-c',
      // First the denial the operator must see (a write to a read-only file, refused by the kernel),
      // then the flood: lookups of distinct long hidden names (.env* is hidden by agent-safe).
      `echo x 2>/dev/null > /workspace/src/app.py; i=0; while [ $i -lt ${FLOOD} ]; do ` +
        `[ -e "/workspace/.env${long}$i" ]; i=$((i+1)); done; true`,
    ]);
    expect(run.stderr).toBe('');
    expect(run.exitCode).toBe(0);
    const id = (JSON.parse(run.stdout) as { sandboxId: string }).sandboxId;
    try {
      const trail = await auditFiles(join(dirs.data, 'sandboxes'));
      expect(trail.length).toBeGreaterThan(0);
      for (const file of trail) expect((await stat(file)).size).toBeLessThanOrEqual(CAP);
      const audit = await agentfense(['audit', id, '--denied', '--limit', '100000', '--json']);
      expect(audit.exitCode).toBe(0);
      const events = JSON.parse(audit.stdout) as AuditEvent[];
      expect(events).toEqual(
        expect.arrayContaining([expect.objectContaining({ path: '/src/app.py', errno: 'EACCES' })]),
      );
      const flood = events.filter((e) => e.op === 'lookup' && e.path.startsWith(`/.env${long}`));
      expect(flood.reduce((n, e) => n + (e.similar ?? 1), 0)).toBeGreaterThanOrEqual(FLOOD);
      // The text view says what a collapsed record stands for.
      const text = await agentfense(['audit', id, '--denied', '--limit', '100000']);
      expect(text.stdout).toMatch(/\(\d+ similar denials, the first shown\)/);
    } finally {
      await agentfense(['sandbox', 'destroy', id]);
    }
  });
});
