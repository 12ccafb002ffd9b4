// `echo x > /workspace/src/app.py` was refused (the kernel checks the mode bits the worker
// publishes, with no OPEN round trip), but `agentfense audit --denied` did not list it: the worker never
// saw the attempt. Now the kernel's re-validation of the file (a GETATTR, served while the caller is still
// inside its syscall) is where the worker reads what was asked (/proc/<pid>/syscall) and audits the
// refusal. Real bwrap sandbox, real mount; each case also checks the refusal itself still happens.
// Creates and removes in a directory the sandbox may only read or view are refused the same way (no w bit
// on the directory); the kernel's re-ask of the directory's attributes is where they are audited, exactly
// once, and never for a directory a path merely walks through.
import { mkdir, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane, Sandbox } from '@agentfense/control';
import type { AuditEvent } from '@agentfense/protocol';
import { EXAMPLE_FILES, assertCleanAndRemove, makeDirs } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

let dirs: TestDirs;
let cp: ControlPlane;
let sb: Sandbox;

beforeAll(async () => {
  dirs = await makeDirs({
    ...EXAMPLE_FILES,
    'src/sub/deep.py': 'x = 1\n',
    'src/lib/a.py': 'a = 1\n',
    'src/lib/b.py': 'b = 1\n',
    'src/gate/inner.py': 'i = 1\n',
    'src/fresh/x.py': 'x = 1\n',
  });
  await mkdir(join(dirs.repo, 'src/empty'));
  await symlink('sub', join(dirs.repo, 'src/to-sub'));
  await symlink('../../output', join(dirs.repo, 'src/gate/to-output'));
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

/** The denials recorded by `script`, which must fail with `Permission denied` (the refusal still happens). */
async function refusedBy(script: string): Promise<AuditEvent[]> {
  const before = await lastSeq();
  const r = await sb.run(script);
  expect(r.exitCode, script).not.toBe(0);
  expect(r.stderr, script).toMatch(/Permission denied/);
  return deniedSince(before);
}

/** Exactly one record of (op, path), with the rule's verdict at the path and EACCES. */
function once(events: AuditEvent[], fields: Partial<AuditEvent>): void {
  const matching = events.filter((e) => e.op === fields.op && e.path === fields.path);
  expect(matching, `${fields.op} ${fields.path} in ${JSON.stringify(events)}`).toHaveLength(1);
  expect(matching[0]).toMatchObject({ errno: 'EACCES', decision: 'deny', ...fields });
}

describe('creates and removes the kernel refuses in a read-only or view-only directory are audited', () => {
  it('each namespace operation, once, with path, operation and the rule at the path', async () => {
    const cases: [string, Partial<AuditEvent>][] = [
      ['mkdir /workspace/src/newdir', { op: 'mkdir', path: '/src/newdir', permission: 'read' }],
      ['echo x > /workspace/src/new.txt', { op: 'create', path: '/src/new.txt', permission: 'read' }],
      ['touch /workspace/docs/notes.md', { op: 'create', path: '/docs/notes.md', permission: 'view' }],
      ['mkfifo /workspace/src/fifo', { op: 'mknod', path: '/src/fifo', permission: 'read' }],
      ['ln -s app.py /workspace/src/alias', { op: 'symlink', path: '/src/alias', permission: 'read' }],
      ['ln /workspace/src/app.py /workspace/src/hard', { op: 'link', path: '/src/hard', permission: 'read' }],
      ['rm -f /workspace/src/util.py', { op: 'unlink', path: '/src/util.py', permission: 'read' }],
      ['rmdir /workspace/src/empty', { op: 'rmdir', path: '/src/empty', permission: 'read' }],
      ['rm -f /workspace/docs/guide.md', { op: 'unlink', path: '/docs/guide.md', permission: 'view' }],
      [
        'mv /workspace/src/app.py /workspace/src/main.py',
        { op: 'rename', path: '/src/app.py', target: '/src/main.py', permission: 'read' },
      ],
      [
        'mv /workspace/output/.keep /workspace/src/keep',
        { op: 'rename', path: '/src/keep', target: '/output/.keep', permission: 'read' },
      ],
    ];
    for (const [script, fields] of cases) {
      const events = await refusedBy(script);
      once(events, fields);
    }
  });

  it('relative paths, directory descriptors and symlinks on the way name the directory refused', async () => {
    once(await refusedBy('cd /workspace/src/sub && mkdir here'), { op: 'mkdir', path: '/src/sub/here' });
    once(await refusedBy('cd /workspace/src && mkdir ../src/./sub/up'), { op: 'mkdir', path: '/src/sub/up' });
    once(
      await refusedBy(
        `python3 -c 'import os; d = os.open("/workspace/src/sub", os.O_RDONLY); os.mkdir("viafd", dir_fd=d)'`,
      ),
      { op: 'mkdir', path: '/src/sub/viafd' },
    );
    once(
      await refusedBy(
        `python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("/workspace/src/sock")'`,
      ),
      { op: 'mknod', path: '/src/sock' },
    );
    once(await refusedBy('mkdir /workspace/src/to-sub/linked'), { op: 'mkdir', path: '/src/sub/linked' });
  });

  it('once also when the directory attributes were stale (a walk re-validates them first)', async () => {
    // Reading a file drops its directory's attributes in the kernel (the listing refresh after a READ), so
    // the walk of the mkdir below sends a GETATTR of /src/lib before the refusal sends its own.
    const events = await refusedBy('cat /workspace/src/lib/a.py >/dev/null && mkdir /workspace/src/lib/new');
    once(events, { op: 'mkdir', path: '/src/lib/new' });
    expect(events.filter((e) => e.path.startsWith('/src/lib'))).toHaveLength(1);
  });

  it('walks through read-only directories and refused opens of existing files record no create', async () => {
    const before = await lastSeq();
    const r = await sb.run(
      [
        'ls /workspace/src/sub /workspace/src/lib >/dev/null',
        'stat /workspace/src /workspace/src/sub >/dev/null',
        'mkdir -p /workspace/src/sub',
        'mkdir /workspace/output/made && touch /workspace/output/made/f && rm -r /workspace/output/made',
        // a stale read-only directory walked through (a symlink into the write area) on the way to a create
        'cat /workspace/src/gate/inner.py >/dev/null && mkdir /workspace/src/gate/to-output/via-link',
        '(touch /workspace/src/lib/b.py 2>/dev/null; true)',
        // O_CREAT of an existing name the kernel has not looked up yet: its create check fails first
        '(: >> /workspace/src/fresh/x.py) 2>/dev/null || true',
      ].join(' && '),
    );
    expect(r.exitCode, r.stderr).toBe(0);
    const events = await deniedSince(before);
    // touch of an existing read-only file is refused as an open for writing and a time update (the file's
    // own audit), never as a create in its directory.
    const others = events.filter((e) => e.path !== '/src/lib/b.py' && e.path !== '/src/fresh/x.py');
    expect(others).toEqual([]);
    expect(events.filter((e) => e.path === '/src/lib/b.py').map((e) => e.op)).toEqual(['open', 'setattr']);
    expect(events.filter((e) => e.path === '/src/fresh/x.py').map((e) => e.op)).toEqual(['open']);
  });
});
