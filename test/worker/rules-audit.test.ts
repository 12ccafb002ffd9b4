// Live rule changes (setRules) take effect at once, even for what the kernel has cached; control-plane
// writes and discards are seen at once too; audit events report denials (and allowed accesses on request).
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { PermissionRule } from '@agentfense/protocol';
import { AGENT_SAFE, mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';
import { probe } from '../helpers/worker-probe.js';

const TREE = {
  'src/a.txt': 'a\n',
  'src/b.txt': 'b\n',
  'output/o.txt': 'o\n',
  'secrets/s.txt': 's\n',
} as const;

const withRule = (...extra: PermissionRule[]): PermissionRule[] => [...AGENT_SAFE, ...extra];

describe.each(['sandbox', 'host'] as const)('live rules as %s', (who) => {
  useMountHygiene();

  it('hiding a file that was just read gives ENOENT at once (cached dentry, attrs and pages)', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE, cacheTtlSeconds: 3600 });
    expect(
      await probe(f[who], [
        ['read', 'src/a.txt'],
        ['stat', 'src'],
        ['listdir', 'src'],
      ]),
    ).toEqual(['ok:a\n', 'ok:0o40555', 'ok:a.txt,b.txt']);
    await f.worker.client.request('setRules', {
      rules: withRule({ pattern: '/src/a.txt', permission: 'none', priority: 200 }),
    });
    expect(
      await probe(f[who], [
        ['read', 'src/a.txt'],
        ['stat', 'src/a.txt'],
        ['listdir', 'src'],
        ['read', 'src/b.txt'],
      ]),
    ).toEqual(['ENOENT', 'ENOENT', 'ok:b.txt', 'ok:b\n']);
    // A running process that keeps the file open is cut off too (reads reach the worker or fail).
    const held = await f[who](
      'exec 3< src/b.txt; head -c1 <&3 >/dev/null; echo ready; read -r _; cat <&3; echo "rc=$?"',
      { stdin: '' },
    );
    expect(held.stdout).toContain('ready');
  });

  it('making a file writable lets the next write succeed at once; making it read-only stops writes', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE, cacheTtlSeconds: 3600 });
    expect(
      await probe(f[who], [
        ['stat', 'src/a.txt'],
        ['write', 'src/a.txt', 'x'],
      ]),
    ).toEqual(['ok:0o100444', 'EACCES']);
    await f.worker.client.request('setRules', {
      rules: withRule({ pattern: '/src/**', permission: 'write', priority: 20 }),
    });
    expect(
      await probe(f[who], [
        ['stat', 'src/a.txt'],
        ['write', 'src/a.txt', 'new'],
        ['read', 'src/a.txt'],
        ['create', 'src/c.txt'],
      ]),
    ).toEqual(['ok:0o100644', 'ok', 'ok:new', 'ok']);
    await f.worker.client.request('setRules', { rules: AGENT_SAFE });
    expect(
      await probe(f[who], [
        ['write', 'src/a.txt', 'again'],
        ['read', 'src/a.txt'],
        ['create', 'src/d.txt'],
        ['unlink', 'src/c.txt'],
      ]),
    ).toEqual(['EACCES', 'ok:new', 'EACCES', 'EACCES']);
  });

  it('revealing a hidden directory and hiding a listed one are seen at once', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE, cacheTtlSeconds: 3600 });
    expect(
      await probe(f[who], [
        ['listdir', '.'],
        ['read', 'secrets/s.txt'],
      ]),
    ).toEqual(['ok:output,src', 'ENOENT']);
    await f.worker.client.request('setRules', {
      rules: withRule({ pattern: '/secrets/**', permission: 'read', priority: 200 }),
    });
    expect(
      await probe(f[who], [
        ['listdir', '.'],
        ['read', 'secrets/s.txt'],
      ]),
    ).toEqual(['ok:output,secrets,src', 'ok:s\n']);
    await f.worker.client.request('setRules', { rules: AGENT_SAFE });
    expect(
      await probe(f[who], [
        ['listdir', '.'],
        ['read', 'secrets/s.txt'],
        ['stat', 'secrets'],
      ]),
    ).toEqual(['ok:output,src', 'ENOENT', 'ENOENT']);
  });

  it('control-plane writeFile and discard are visible at once (no stale negative entries or pages)', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE, cacheTtlSeconds: 3600 });
    expect(
      await probe(f[who], [
        ['read', 'output/new.txt'],
        ['read', 'output/o.txt'],
      ]),
    ).toEqual(['ENOENT', 'ok:o\n']);
    await f.worker.client.request('writeFile', { path: '/output/new.txt', data: Buffer.from('new\n') });
    await f.worker.client.request('writeFile', { path: '/output/o.txt', data: Buffer.from('O!\n') });
    expect(
      await probe(f[who], [
        ['read', 'output/new.txt'],
        ['read', 'output/o.txt'],
      ]),
    ).toEqual(['ok:new\n', 'ok:O!\n']);
    expect(
      await probe(f[who], [
        ['unlink', 'output/o.txt'],
        ['read', 'output/o.txt'],
        ['create', 'output/x'],
      ]),
    ).toEqual(['ok', 'ENOENT', 'ok']);
    await f.worker.client.request('discard', {});
    expect(
      await probe(f[who], [
        ['read', 'output/o.txt'],
        ['read', 'output/new.txt'],
        ['stat', 'output/x'],
        ['listdir', 'output'],
      ]),
    ).toEqual(['ok:o\n', 'ENOENT', 'ENOENT', 'ok:o.txt']);
  });

  it('a file hidden while a process holds it open: fstat, fchmod, fchown and read answer ENOENT', async () => {
    const f = await mountFixture({
      tree: TREE,
      rules: withRule({ pattern: '/src/**', permission: 'write', priority: 20 }),
    });
    const script = String.raw`
import errno, os, time
fd = os.open('src/a.txt', os.O_RDWR)
open('output/ready', 'w').close()
while not os.path.exists('output/go'): time.sleep(0.02)
out = []
for name, fn in [('fstat', lambda: os.fstat(fd)), ('fchmod', lambda: os.fchmod(fd, 0o600)),
                 ('fchown', lambda: os.fchown(fd, os.getuid(), os.getgid())), ('pread', lambda: os.pread(fd, 10, 0)),
                 ('pwrite', lambda: os.pwrite(fd, b'x', 0))]:
    try: fn(); out.append(name + ':ok')
    except OSError as e: out.append(name + ':' + errno.errorcode[e.errno])
print(' '.join(out))
`;
    const running = f[who]('python3 -', { stdin: script });
    const deadline = Date.now() + 10_000;
    while ((await stat(join(f.delta, 'upper/output/ready')).catch(() => null)) === null) {
      if (Date.now() > deadline) throw new Error('the holder never started');
      await new Promise((r) => setTimeout(r, 20));
    }
    await f.worker.client.request('setRules', {
      rules: withRule(
        { pattern: '/src/**', permission: 'write', priority: 20 },
        { pattern: '/src/a.txt', permission: 'none', priority: 200 },
      ),
    });
    await f.worker.client.request('writeFile', { path: '/output/go', data: Buffer.from('') });
    const r = await running;
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('fstat:ENOENT fchmod:ENOENT fchown:ENOENT pread:ENOENT pwrite:ENOENT\n');
    const chown = await f.waitAudit((e) => e.op === 'setattr' && e.path === '/src/a.txt');
    expect(chown).toMatchObject({ decision: 'deny', errno: 'ENOENT', permission: 'none' });
  });

  it('a lookup racing a control-plane write never leaves a stale negative entry (20 rounds)', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE, cacheTtlSeconds: 3600 });
    // The poller looks the name up in a tight loop, so lookups are in flight while writeFile invalidates.
    const script = String.raw`
import os, sys, time
for i in range(20):
    deadline = time.time() + 5
    while not os.path.exists('output/go-%d' % i):
        if time.time() > deadline: print('stuck at', i); sys.exit(1)
print('all seen')
`;
    const running = f[who]('python3 -', { stdin: script });
    for (let i = 0; i < 20; i++) {
      await new Promise((r) => setTimeout(r, 30));
      await f.worker.client.request('writeFile', { path: `/output/go-${i}`, data: Buffer.from('') });
    }
    const r = await running;
    expect(r.stdout).toBe('all seen\n');
  });

  it('audit: denials arrive with op, path and errno; allowed accesses only when asked', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    await probe(f[who], [
      ['read', 'secrets/s.txt'],
      ['write', 'src/a.txt', 'x'],
      ['read', 'src/b.txt'],
    ]);
    const hidden = await f.waitAudit((e) => e.path === '/secrets');
    expect(hidden).toMatchObject({ decision: 'deny', op: 'lookup', errno: 'ENOENT', permission: 'none' });
    if (who === 'host') {
      // The sandbox user is stopped by the mode bits in the kernel; root's write reaches the worker.
      const write = await f.waitAudit((e) => e.path === '/src/a.txt' && e.decision === 'deny');
      expect(write).toMatchObject({ errno: 'EACCES', permission: 'read' });
    }
    expect(f.audit.some((e) => e.decision === 'allow')).toBe(false);
    await f.worker.client.request('setAudit', { allowed: true });
    await probe(f[who], [['create', 'output/audited.txt']]);
    const allowed = await f.waitAudit((e) => e.decision === 'allow' && e.path === '/output/audited.txt');
    expect(allowed).toMatchObject({ op: 'create', permission: 'write' });
  });
});
