// The `agentfense` executable as a user runs it: the built bin, and `pnpm exec agentfense` at the root.
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;

describe('agentfense executable', () => {
  it('explains a path of the bundled example codebase with the built CLI', async () => {
    const run = await execa(
      process.execPath,
      [bin, 'explain', '--json', '/secrets/deploy.pem', '/src/app.py'],
      {
        cwd: root,
      },
    );
    expect(JSON.parse(run.stdout)).toMatchObject([
      { path: '/secrets/deploy.pem', permission: 'none' },
      { path: '/src/app.py', permission: 'read' },
    ]);
  });

  it('is runnable as `pnpm exec agentfense` at the repository root', async () => {
    const run = await execa('pnpm', ['exec', 'agentfense', 'presets'], { cwd: root });
    expect(run.stdout).toMatch(/^agent-safe\s/m);
  });

  it('reports errors on stderr with a non-zero status', async () => {
    const run = await execa(process.execPath, [bin, 'explain', '--preset', 'missing', '/x'], {
      cwd: root,
      reject: false,
    });
    expect(run.exitCode).toBe(1);
    expect(run.stderr).toBe(
      'agentfense: unknown preset "missing"; known presets: agent-safe, read-only, full-access, development, view-only',
    );
    expect(run.stdout).toBe('');
  });
});
