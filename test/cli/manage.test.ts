// Management commands as a user runs them: stored codebases created from a directory (with progress),
// listed, inspected, their files listed, and deleted (refused while a sandbox uses one); sandboxes
// filtered by label.
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
const demo = `${root}examples/demo-repo`;

let scratch: string;
let data: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-cli-manage-'));
  data = join(scratch, 'data');
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

/** Runs the CLI on the test's data directory (given before any `--`, which ends the options). */
function agentfense(args: string[]) {
  const end = args.indexOf('--');
  const withData =
    end === -1 ? [...args, '--data', data] : [...args.slice(0, end), '--data', data, ...args.slice(end)];
  return execa(process.execPath, [bin, ...withData], { reject: false });
}

describe('agentfense codebase', () => {
  it('creates a stored codebase from a directory, lists, inspects, lists files and deletes it', async () => {
    const src = join(scratch, 'src');
    await mkdir(join(src, 'lib'), { recursive: true });
    await writeFile(join(src, 'a.txt'), 'a'.repeat(1000));
    await writeFile(join(src, 'lib', 'b.txt'), 'b');
    await symlink('/etc/passwd', join(src, 'link')); // never followed, never uploaded

    const created = await agentfense(['codebase', 'create', '--name', 'app', '--owner', 'me', '--from', src]);
    expect(created.exitCode).toBe(0);
    const id = created.stdout.trim();
    expect(id).toMatch(/^cb_/);
    expect(created.stderr).toContain('uploaded 0.0 MiB of 0.0 MiB (100%)');
    expect(created.stderr).toContain('2 file(s) uploaded');
    expect(created.stderr).toContain('skipped 1 symlink(s) or special file(s): link');

    const info = JSON.parse((await agentfense(['codebase', 'inspect', id, '--json'])).stdout) as Record<
      string,
      unknown
    >;
    expect(info).toMatchObject({
      id,
      name: 'app',
      ownerId: 'me',
      kind: 'stored',
      fileCount: 2,
      sizeBytes: 1001,
    });
    const files = await agentfense(['codebase', 'files', id, '-r']);
    expect(files.stdout.split('\n').filter(Boolean).sort()).toEqual(['a.txt', 'lib/', 'lib/b.txt']);
    const list = JSON.parse((await agentfense(['codebase', 'list', '--json'])).stdout) as { id: string }[];
    expect(list.map((c) => c.id)).toContain(id);

    expect((await agentfense(['codebase', 'destroy', id])).exitCode).toBe(0);
    const gone = await agentfense(['codebase', 'inspect', id]);
    expect(gone.exitCode).toBe(1);
    expect(gone.stderr).toContain(id);
  });

  it('refuses to delete a codebase a sandbox uses, and filters sandboxes by label', async () => {
    const r = await agentfense(['run', demo, '--keep', '--label', 'team=red', '--json', '--', 'true']);
    expect(r.exitCode).toBe(0);
    const { sandboxId } = JSON.parse(r.stdout) as { sandboxId: string };
    const sb = JSON.parse((await agentfense(['sandbox', 'inspect', sandboxId, '--json'])).stdout) as {
      codebaseId: string;
    };
    const refused = await agentfense(['codebase', 'destroy', sb.codebaseId]);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain(sb.codebaseId);

    const red = JSON.parse(
      (await agentfense(['sandbox', 'list', '--label', 'team=red', '--json'])).stdout,
    ) as { id: string }[];
    expect(red.map((s) => s.id)).toEqual([sandboxId]);
    const blue = JSON.parse(
      (await agentfense(['sandbox', 'list', '--label', 'team=blue', '--json'])).stdout,
    ) as unknown[];
    expect(blue).toEqual([]);
    const badState = await agentfense(['sandbox', 'list', '--state', 'sleeping']);
    expect(badState.exitCode).toBe(2);

    expect((await agentfense(['sandbox', 'destroy', sandboxId])).exitCode).toBe(0);
    expect((await agentfense(['codebase', 'destroy', sb.codebaseId])).exitCode).toBe(0);
  });
});

describe('agentfense sandbox checkpoint|checkpoints|restore|fork|checkpoint-delete', () => {
  it("freezes a kept sandbox's files, brings them back after a discard, forks it, and commits", async () => {
    const repo = join(scratch, 'cp-repo');
    await mkdir(repo, { recursive: true });
    await writeFile(join(repo, 'a.txt'), 'a\n');
    const made = await agentfense([
      'run',
      repo,
      '--keep',
      '--preset',
      'full-access',
      '--json',
      '--',
      'sh',
      '-c',
      'echo one > /workspace/new.txt',
    ]);
    expect(made.exitCode, made.stderr).toBe(0);
    const { sandboxId } = JSON.parse(made.stdout) as { sandboxId: string };
    const taken = await agentfense(['sandbox', 'checkpoint', sandboxId, '--name', 'first']);
    expect(taken.exitCode, taken.stderr).toBe(0);
    const checkpointId = taken.stdout.trim();
    expect(checkpointId).toMatch(/^cp_/);
    const listed = JSON.parse((await agentfense(['sandbox', 'checkpoints', sandboxId, '--json'])).stdout) as {
      id: string;
      name: string;
    }[];
    expect(listed.map((c) => [c.id, c.name])).toEqual([[checkpointId, 'first']]);
    expect((await agentfense(['sandbox', 'discard', sandboxId])).exitCode).toBe(0);
    const restored = await agentfense(['sandbox', 'restore', sandboxId, checkpointId]);
    expect(restored.exitCode, restored.stderr).toBe(0);
    const forked = await agentfense(['sandbox', 'fork', sandboxId, '--count', '2']);
    expect(forked.exitCode, forked.stderr).toBe(0);
    const forks = forked.stdout.trim().split('\n');
    expect(forks).toHaveLength(2);
    const commit = JSON.parse((await agentfense(['sandbox', 'commit', sandboxId, '--json'])).stdout) as {
      applied: { path: string }[];
    };
    expect(commit.applied.map((c) => c.path)).toEqual(['/new.txt']);
    expect(await readFile(join(repo, 'new.txt'), 'utf8')).toBe('one\n');
    const bad = await agentfense(['sandbox', 'restore', sandboxId, 'cp_nope']);
    expect(bad.exitCode).not.toBe(0);
    expect(bad.stderr).toContain('cp_nope');
    expect((await agentfense(['sandbox', 'checkpoint-delete', sandboxId, checkpointId])).exitCode).toBe(0);
    expect((await agentfense(['sandbox', 'destroy', sandboxId, ...forks])).exitCode).toBe(0);
  });
});
