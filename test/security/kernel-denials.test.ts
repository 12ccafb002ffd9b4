// Issue 12 row 7: `echo x > /workspace/src/app.py` was refused (the kernel checks the mode bits the worker
// publishes, with no OPEN round trip), but `agentfense audit --denied` did not list it: the worker never
// saw the attempt. Now the kernel's re-validation of the file (a GETATTR, served while the caller is still
// inside its syscall) is where the worker reads what was asked (/proc/<pid>/syscall) and audits the
// refusal. Real bwrap sandbox, real mount; each case also checks the refusal itself still happens.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane, Sandbox } from '@agentfense/control';
import type { AuditEvent } from '@agentfense/protocol';
import { assertCleanAndRemove, makeDirs } from '../control/fixtures.js';
import type { TestDirs } from '../control/fixtures.js';

let dirs: TestDirs;
let cp: ControlPlane;
let sb: Sandbox;

beforeAll(async () => {
  dirs = await makeDirs();
  cp = await ControlPlane.open({ dataDir: dirs.dataDir });
  sb = await Sandbox.fromLocal(dirs.repo, {
    controlPlane: cp,
    rules: [
      { pattern: '**', permission: 'read' },
      { pattern: '/output/**', permission: 'write' },
      { pattern: '/docs/**', permission: 'view' },
    ],
  });
});

afterAll(async () => {
  await sb?.destroy();
  await cp?.close();
  await assertCleanAndRemove(dirs);
});

/** Denials recorded after `seq` (an audit query sees every event recorded before it). */
async function deniedSince(seq: number): Promise<AuditEvent[]> {
  return (await sb.audit({ decision: 'deny' })).filter((e) => e.seq > seq);
}

async function lastSeq(): Promise<number> {
  return Math.max(0, ...(await sb.audit()).map((e) => e.seq));
}

describe('denials the kernel makes from the mode bits are audited', () => {
  it('a write to a read-only file, whether its attributes were cached or not', async () => {
    for (const [name, script] of [
      ['first access', 'echo x > /workspace/src/app.py'],
      ['after a read', 'cat /workspace/src/util.py >/dev/null; echo x >> /workspace/src/util.py'],
    ] as const) {
      const before = await lastSeq();
      const r = await sb.run(script);
      expect(r.exitCode, name).not.toBe(0);
      expect(r.stderr, name).toContain('Permission denied');
      const path = name === 'first access' ? '/src/app.py' : '/src/util.py';
      const expected: unknown = expect.arrayContaining([
        expect.objectContaining({ op: 'open', path, permission: 'read', errno: 'EACCES' }),
      ]);
      expect(await deniedSince(before), name).toEqual(expected);
    }
  });

  it('truncating a read-only file, and reading a view-only one', async () => {
    const before = await lastSeq();
    const r = await sb.run('truncate -s 0 /workspace/src/app.py; cat /workspace/docs/guide.md');
    expect(r.stderr).toMatch(/app\.py.*Permission denied/);
    expect(r.stderr).toMatch(/guide\.md.*Permission denied/);
    const expected: unknown = expect.arrayContaining([
      expect.objectContaining({ op: 'open', path: '/src/app.py', permission: 'read' }),
      expect.objectContaining({ op: 'open', path: '/docs/guide.md', permission: 'view' }),
    ]);
    expect(await deniedSince(before)).toEqual(expected);
  });

  it('allowed accesses of the same files are not reported as denials', async () => {
    const before = await lastSeq();
    const r = await sb.run('cat /workspace/src/app.py; stat /workspace/docs/guide.md; ls -l /workspace/src');
    expect(r.exitCode).toBe(0);
    expect(await deniedSince(before)).toEqual([]);
  });
});
