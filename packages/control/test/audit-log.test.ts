import { appendFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AuditEvent } from '@agentfense/protocol';
import { AuditWriter, readAudit } from '../src/sandboxes/audit-log.js';

const event = (seq: number, decision: 'allow' | 'deny'): AuditEvent => ({
  seq,
  time: seq,
  op: 'lookup',
  path: `/f${seq}`,
  decision,
  permission: decision === 'deny' ? 'none' : 'read',
});

describe('audit trail', () => {
  it('appends batches in order and filters by decision and limit; a torn last line is skipped', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'af-audit-'));
    const file = join(dir, 'audit.jsonl');
    try {
      expect(await readAudit(file)).toEqual([]);
      const errors: unknown[] = [];
      const writer = new AuditWriter(file, (err) => errors.push(err));
      writer.append([event(1, 'deny'), event(2, 'allow')]);
      writer.append([]);
      writer.append([event(3, 'deny'), event(4, 'deny')]);
      await writer.flush();
      await appendFile(file, '{"seq": 5, "tor');
      expect((await readAudit(file)).map((e) => e.seq)).toEqual([1, 2, 3, 4]);
      expect((await readAudit(file, { decision: 'deny' })).map((e) => e.seq)).toEqual([1, 3, 4]);
      expect((await readAudit(file, { decision: 'deny', limit: 2 })).map((e) => e.seq)).toEqual([3, 4]);
      await expect(readAudit(file, { limit: 0 })).rejects.toThrow(/limit/);
      expect(errors).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
