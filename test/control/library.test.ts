// The library API end to end (contract §7) on real bwrap and a real worker mount: the seeds' scenarios,
// exec's contract (exit codes, stdin, env, cwd, timeouts), streaming, readFile/writeFile through the rules.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane, Sandbox } from '@agentfense/control';
import { assertCleanAndRemove, makeDirs } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

describe('Sandbox.fromLocal with the agent-safe preset', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let sb: Sandbox;

  beforeAll(async () => {
    dirs = await makeDirs();
    cp = await ControlPlane.open({ dataDir: dirs.dataDir });
    sb = await Sandbox.fromLocal(dirs.repo, { controlPlane: cp, env: { SANDBOX_VAR: 'set-at-create' } });
  });
  afterAll(async () => {
    await sb?.destroy();
    await cp?.close();
    await assertCleanAndRemove(dirs);
  });

  it('hides secrets from ls, find and cat', async () => {
    const ls = await sb.run('ls -A /workspace /workspace/secrets; echo status=$?');
    expect(ls.stdout).toContain('README.md');
    expect(ls.stdout).toContain('src');
    expect(ls.stdout).not.toContain('.env');
    expect(ls.stdout).not.toContain('deploy.pem');
    expect(ls.stderr).toContain('secrets'); // ls of the hidden dir: No such file or directory
    const find = await sb.run('find /workspace');
    expect(find.exitCode).toBe(0);
    expect(find.stdout).toContain('/workspace/src/app.py');
    for (const hidden of ['secrets', '.env', 'credentials', 'private.key', '.pem']) {
      expect(find.stdout).not.toContain(hidden);
    }
    const cat = await sb.run('cat /workspace/secrets/private.key /workspace/.env');
    expect(cat.exitCode).not.toBe(0);
    expect(cat.stdout).toBe('');
    expect(cat.stderr).toMatch(/No such file or directory/);
  });

  it('reads code and writes only into /output', async () => {
    expect((await sb.run('cat /workspace/src/app.py')).stdout).toBe('print("hello")\n');
    const denied = await sb.run('echo x > /workspace/src/app.py');
    expect(denied.exitCode).not.toBe(0);
    expect(denied.stderr).toMatch(/Permission denied|Read-only/);
    const allowed = await sb.run(
      'echo report > /workspace/output/report.txt && cat /workspace/output/report.txt',
    );
    expect(allowed.exitCode).toBe(0);
    expect(allowed.stdout).toBe('report\n');
    // The user's directory is untouched until a commit.
    await expect(readFile(join(dirs.repo, 'output/report.txt'))).rejects.toThrow(/ENOENT/);
    const changes = await sb.changes();
    expect(changes.map((c) => [c.path, c.kind])).toContainEqual(['/output/report.txt', 'added']);
    expect((await sb.diff()).diff).toContain('+report');
  });

  it('passes exit codes, stdin, env and cwd', async () => {
    expect((await sb.run('exit 7')).exitCode).toBe(7);
    expect((await sb.run('cat', { stdin: 'from stdin' })).stdout).toBe('from stdin');
    const env = await sb.run('echo "$SANDBOX_VAR $PER_EXEC"', { env: { PER_EXEC: 'per-exec' } });
    expect(env.stdout).toBe('set-at-create per-exec\n');
    expect((await sb.run('pwd')).stdout).toBe('/workspace\n');
    expect((await sb.run('pwd', { cwd: '/workspace/src' })).stdout).toBe('/workspace/src\n');
    expect((await sb.run(['printf', '%s|', 'a b', 'c'])).stdout).toBe('a b|c|');
  });

  it('does not leak the control plane environment', async () => {
    process.env.AF_TEST_SECRET_ENV = 'leaked-if-seen';
    try {
      const env = await sb.run('env');
      expect(env.stdout).not.toContain('leaked-if-seen');
      expect(env.stdout).not.toContain('AGENTFENSE_DATA_DIR');
    } finally {
      delete process.env.AF_TEST_SECRET_ENV;
    }
  });

  it('kills the whole tree on timeout and reports it', async () => {
    const started = Date.now();
    // A distinctive duration, so the host-side check below finds only these processes.
    const r = await sb.run('sleep 31.4159 & sleep 31.4159; echo never', { timeoutMs: 500 });
    expect(r.timedOut).toBe(true);
    expect(r.stdout).not.toContain('never');
    expect(Date.now() - started).toBeLessThan(10_000);
    // Nothing of it is left, neither in the sandbox nor on the host.
    const ps = await sb.run('ps -e -o args= 2>/dev/null || cat /proc/[0-9]*/cmdline');
    expect(ps.stdout).not.toContain('31.4159');
    const host = await execa('ps', ['-e', '-o', 'args=']);
    expect(host.stdout).not.toContain('sleep 31.4159');
  });

  it('streams output chunks, then the result', async () => {
    const stream = sb.execStream('echo one; echo two >&2; echo three');
    const chunks: string[] = [];
    for await (const chunk of stream) chunks.push(`${chunk.stream}:${chunk.data.toString()}`);
    const result = await stream.result;
    expect(result.exitCode).toBe(0);
    expect(chunks.join('')).toContain('stdout:one');
    expect(chunks.join('')).toContain('stderr:two');
    expect(result.stdout.toString()).toBe('one\nthree\n');
  });

  it('readFile and writeFile go through the rules', async () => {
    expect((await sb.readFile('/src/app.py')).toString()).toBe('print("hello")\n');
    await expect(sb.readFile('/secrets/private.key')).rejects.toThrow();
    await expect(sb.writeFile('/src/app.py', 'nope')).rejects.toThrow();
    await sb.writeFile('/output/from-lib.txt', 'library');
    expect((await sb.run('cat /workspace/output/from-lib.txt')).stdout).toBe('library');
  });

  it('opens a session whose state persists, closed when the sandbox stops', async () => {
    const session = await sb.session();
    await session.exec('cd /workspace/src && export GREETING=hi');
    const r = await session.exec('pwd; echo $GREETING');
    expect(r.stdout.toString()).toBe('/workspace/src\nhi\n');
    expect(cp.listSessions({ sandboxId: sb.id }).map((s) => s.id)).toEqual([session.id]);
    await session.close();
    expect(cp.listSessions({ sandboxId: sb.id })).toEqual([]);
  });

  it('records denials in the audit trail', async () => {
    await sb.run('cat /workspace/src/app.py > /workspace/src/copy.py');
    const denials = await sb.audit({ decision: 'deny' });
    expect(denials.length).toBeGreaterThan(0);
    expect(denials.every((e) => e.decision === 'deny')).toBe(true);
  });
});

describe('other policies', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;

  beforeAll(async () => {
    dirs = await makeDirs();
    cp = await ControlPlane.open({ dataDir: dirs.dataDir });
  });
  afterAll(async () => {
    await cp?.close();
    await assertCleanAndRemove(dirs);
  });

  it('view-only lists names but cannot read content', async () => {
    await using sb = await Sandbox.fromLocal(dirs.repo, { controlPlane: cp, preset: 'view-only' });
    const ls = await sb.run('ls /workspace/src');
    expect(ls.stdout).toContain('app.py');
    const cat = await sb.run('cat /workspace/src/app.py');
    expect(cat.exitCode).not.toBe(0);
    expect(cat.stderr).toMatch(/Permission denied/);
  });

  it('custom rules: the /secrets/public.key exception', async () => {
    const rules = [
      { pattern: '**/*', permission: 'read', priority: 0 },
      { pattern: '/output/**', permission: 'write', priority: 10 },
      { pattern: '**/.env*', permission: 'none', priority: 100 },
      { pattern: '/secrets/**', permission: 'none', priority: 100 },
      { pattern: '**/*.key', permission: 'none', priority: 100 },
      { pattern: '/secrets/public.key', permission: 'read', priority: 200 },
    ];
    await using sb = await Sandbox.fromLocal(dirs.repo, { controlPlane: cp, rules });
    expect((await sb.run('cat /workspace/README.md')).exitCode).toBe(0);
    expect((await sb.run('echo result > /workspace/output/log.txt')).exitCode).toBe(0);
    expect((await sb.run('ls /workspace/secrets/')).stdout).toBe('public.key\n');
    expect((await sb.run('cat /workspace/secrets/public.key')).stdout).toBe('PUBLIC-KEY-CONTENT\n');
    expect((await sb.run('cat /workspace/secrets/private.key')).exitCode).not.toBe(0);
  });

  it('rejects invalid rules at create, naming the rule index', async () => {
    await expect(
      Sandbox.fromLocal(dirs.repo, {
        controlPlane: cp,
        rules: [
          { pattern: '/a', permission: 'read' },
          { pattern: '/b', permission: 'bogus' },
        ],
      }),
    ).rejects.toThrow(/1/);
    expect(await cp.listCodebases()).toEqual([]);
  });

  it('setRules on a running sandbox takes effect at once', async () => {
    await using sb = await Sandbox.fromLocal(dirs.repo, { controlPlane: cp, preset: 'agent-safe' });
    expect((await sb.run('cat /workspace/src/app.py')).exitCode).toBe(0);
    await sb.setRules([
      { pattern: '**', permission: 'read' },
      { pattern: '/src/', permission: 'none' },
    ]);
    expect((await sb.run('cat /workspace/src/app.py')).exitCode).not.toBe(0);
    expect((await sb.run('ls /workspace')).stdout).not.toContain('src');
    expect((await sb.info()).rules).toHaveLength(2);
  });

  it('closes open sessions when the sandbox stops', async () => {
    await using sb = await Sandbox.fromLocal(dirs.repo, { controlPlane: cp });
    const session = await sb.session({ shell: '/bin/bash' });
    expect((await session.exec('echo $BASH_VERSION')).stdout.toString()).not.toBe('\n');
    await cp.stopSandbox(sb.id);
    expect(session.status).toBe('closed');
    expect(session.closedReason).toBe('sandbox-stopped');
  });

  it('reports the resource limits in force', async () => {
    await using sb = await Sandbox.fromLocal(dirs.repo, {
      controlPlane: cp,
      resources: { pidsLimit: 64, memoryBytes: 256 * 1024 * 1024 },
    });
    const { limits } = await sb.info();
    expect(limits).toMatchObject({ pidsLimit: 64, memoryBytes: 256 * 1024 * 1024 });
    expect(limits?.mechanism).toMatch(/cgroup/);
  });

  it('dispose removes the sandbox, the codebase record and its data, not the directory', async () => {
    let id: string;
    {
      await using sb = await Sandbox.fromLocal(dirs.repo, { controlPlane: cp });
      id = sb.id;
      await sb.run('echo x > /workspace/output/x');
    }
    await expect(cp.getSandbox(id)).rejects.toThrow(/not found/);
    expect(await cp.listCodebases()).toEqual([]);
    expect(await readFile(join(dirs.repo, 'README.md'), 'utf8')).toBe('# demo\n');
    await expect(readFile(join(dirs.dataDir, 'sandboxes', id, 'worker.log'))).rejects.toThrow(/ENOENT/);
  });
});
