import { appendFile, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AuditEvent } from '@agentfense/protocol';
import { AuditWriter, auditMaxBytes, readAudit } from '../src/trail.js';
import { DENIALS_PER_WINDOW } from '../src/collapse.js';

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

  it('rotates at the cap into one older file, and reads both in order', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'af-audit-'));
    const file = join(dir, 'audit.jsonl');
    try {
      const writer = new AuditWriter(file, (err) => expect.fail(String(err)), { maxBytes: 4096 });
      // Allowed accesses are never collapsed: 200 lines of ~100 bytes, over four times the cap.
      for (let seq = 1; seq <= 200; seq++) writer.append([event(seq, 'allow')]);
      await writer.flush();
      expect((await stat(file)).size).toBeLessThanOrEqual(4096);
      expect((await stat(`${file}.1`)).size).toBeLessThanOrEqual(4096);
      const seqs = (await readAudit(file, { limit: 1000 })).map((e) => e.seq);
      // What is left is the newest, contiguous and in order, ending with the last one written.
      expect(seqs.at(-1)).toBe(200);
      expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => 201 - seqs.length + i));
      expect(seqs.length).toBeGreaterThan(40);
      expect((await readAudit(file, { limit: 3 })).map((e) => e.seq)).toEqual([198, 199, 200]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('collapses a flood of similar denials into one record with a count; other kinds pass', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'af-audit-'));
    const file = join(dir, 'audit.jsonl');
    try {
      const writer = new AuditWriter(file, (err) => expect.fail(String(err)), { maxBytes: 1 << 20 });
      const flood = Array.from({ length: 5000 }, (_, i) => ({ ...event(i + 1, 'deny'), time: 1000 }));
      writer.append(flood);
      writer.append([
        { ...event(6000, 'deny'), op: 'open', errno: 'EACCES', permission: 'read', time: 1000 },
      ]);
      await writer.flush();
      const events = await readAudit(file);
      expect(events.filter((e) => e.op === 'lookup' && e.similar === undefined)).toHaveLength(
        DENIALS_PER_WINDOW,
      );
      const summary = events.find((e) => e.similar !== undefined);
      expect(summary).toMatchObject({ op: 'lookup', path: `/f${DENIALS_PER_WINDOW + 1}` });
      expect(summary?.similar).toBe(5000 - DENIALS_PER_WINDOW);
      expect(events.find((e) => e.op === 'open')).toMatchObject({ seq: 6000 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('reads a trail line by line: a file far larger than the limit is fine', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'af-audit-'));
    const file = join(dir, 'audit.jsonl');
    try {
      const lines = Array.from({ length: 50_000 }, (_, i) => JSON.stringify(event(i + 1, 'deny')));
      await writeFile(file, `${lines.join('\n')}\n`);
      expect((await readAudit(file, { limit: 2 })).map((e) => e.seq)).toEqual([49_999, 50_000]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('takes its cap from AGENTFENSE_AUDIT_MAX_BYTES and names the variable when it is wrong', () => {
    expect(auditMaxBytes({})).toBe(32 * 1024 * 1024);
    expect(auditMaxBytes({ AGENTFENSE_AUDIT_MAX_BYTES: '65536' })).toBe(65536);
    expect(() => auditMaxBytes({ AGENTFENSE_AUDIT_MAX_BYTES: '10MB' })).toThrow(/AGENTFENSE_AUDIT_MAX_BYTES/);
    expect(() => auditMaxBytes({ AGENTFENSE_AUDIT_MAX_BYTES: '100' })).toThrow(/at least 4096/);
  });
});
