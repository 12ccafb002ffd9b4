// `agentfense node` end to end on this host: a real agent process, a sandbox container made as the Swarm
// adapter's spec makes one, and the agent's API as the API tier would use it: attach (the view and af-init
// arrive in the running container), exec through af-init with the rules enforced by the view, a session,
// files and diff through the worker, a live rule change, detach, and a restarted agent clearing what a
// killed one left.
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { isFuseMounted } from '@agentfense/fuse-worker';
import {
  call,
  createSandboxContainer,
  exec,
  randomToken,
  removeContainer,
  sessionRun,
  startAgent,
  type AgentProcess,
} from '#helpers/node-agent.js';

const docker = inject('docker');
const dockerHost = docker.dockerHost ?? '';

const RULES = [
  { pattern: '**', permission: 'write' },
  { pattern: 'secret.txt', permission: 'none' },
  { pattern: 'docs/**', permission: 'read' },
];

describe.skipIf(docker.unavailable !== null)(
  `node agent: attach, exec, sessions, files, detach, restart${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    let root: string;
    let codebase: string;
    let agent: AgentProcess | undefined;
    const token = randomToken();
    const containers: string[] = [];

    const start = async (): Promise<AgentProcess> =>
      (agent = await startAgent({
        stateDir: join(root, 'state'),
        codebaseRoot: join(root, 'codebases'),
        token,
        tokenFile: join(root, 'token'),
        dockerHost,
      }));

    const attach = async (sandboxId: string): Promise<void> => {
      containers.push(await createSandboxContainer(dockerHost, sandboxId));
      const r = await call(agent!, token, 'POST', '/v1/sandboxes', {
        sandboxId,
        codebasePath: codebase,
        rules: RULES,
      });
      expect(r.status, r.text).toBe(201);
    };

    beforeAll(async () => {
      root = await mkdtemp(join(tmpdir(), 'af-node-agent-'));
      codebase = join(root, 'codebases', 'app');
      await mkdir(join(codebase, 'docs'), { recursive: true });
      await writeFile(join(codebase, 'readme.txt'), 'hello from the codebase\n');
      await writeFile(join(codebase, 'secret.txt'), 'the secret\n');
      await writeFile(join(codebase, 'docs', 'guide.txt'), 'read only\n');
      await start();
    });

    afterAll(async () => {
      await agent?.stop();
      for (const id of containers) await removeContainer(dockerHost, id);
      await rm(root, { recursive: true, force: true });
    });

    it('runs commands in the container on the view, with the rules enforced', async () => {
      const sandboxId = `sb_${randomUUID()}`;
      await attach(sandboxId);
      // af-init is the container's pid 1; the view is at /workspace; the ready marker is there.
      const init = await exec(agent!, token, sandboxId, ['cat', '/proc/1/comm', '/.agentfense/ready']);
      expect(init).toEqual({ stdout: 'af-init\n', stderr: '', exitCode: 0 });

      const readable = await exec(agent!, token, sandboxId, ['cat', '/workspace/readme.txt']);
      expect(readable).toEqual({ stdout: 'hello from the codebase\n', stderr: '', exitCode: 0 });

      const hidden = await exec(agent!, token, sandboxId, ['cat', '/workspace/secret.txt']);
      expect(hidden.exitCode).toBe(1);
      expect(hidden.stderr).toContain('No such file or directory');
      const listing = await exec(agent!, token, sandboxId, ['ls', '/workspace']);
      expect(listing.stdout.split('\n')).not.toContain('secret.txt');

      const denied = await exec(agent!, token, sandboxId, ['sh', '-c', 'echo x > /workspace/docs/guide.txt']);
      expect(denied.exitCode).not.toBe(0);
      expect(denied.stderr).toContain('Permission denied');
      expect(await readFile(join(codebase, 'docs', 'guide.txt'), 'utf8')).toBe('read only\n');

      const wrote = await exec(agent!, token, sandboxId, [
        'sh',
        '-c',
        'echo changed > /workspace/readme.txt',
      ]);
      expect(wrote.exitCode).toBe(0);
      // The codebase is untouched until a commit: the change is in the delta.
      expect(await readFile(join(codebase, 'readme.txt'), 'utf8')).toBe('hello from the codebase\n');

      // Files and diff through the worker, as the control plane reads them.
      const file = await call(agent!, token, 'GET', `/v1/sandboxes/${sandboxId}/files?path=readme.txt`);
      expect(file.status).toBe(200);
      expect(Buffer.from(file.json['data'] as string, 'base64').toString()).toBe('changed\n');
      const secret = await call(agent!, token, 'GET', `/v1/sandboxes/${sandboxId}/files?path=secret.txt`);
      expect(secret.status).toBe(404);
      const diff = await call(agent!, token, 'GET', `/v1/sandboxes/${sandboxId}/diff`);
      expect(diff.json['diff']).toContain('-hello from the codebase');
      expect(diff.json['diff']).toContain('+changed');
      const changes = await call(agent!, token, 'GET', `/v1/sandboxes/${sandboxId}/changes`);
      expect(JSON.stringify(changes.json['changes'])).toContain('readme.txt');

      // The denials above are in the trail the node keeps, as the API tier reads it.
      const audit = await call(agent!, token, 'GET', `/v1/sandboxes/${sandboxId}/audit?decision=deny`);
      expect(audit.status).toBe(200);
      const denials = audit.json['events'] as { path: string; decision: string; errno?: string }[];
      expect(denials.some((e) => e.path === '/secret.txt' && e.errno === 'ENOENT')).toBe(true);
      expect(denials.some((e) => e.path === '/docs/guide.txt' && e.errno === 'EACCES')).toBe(true);
      expect(denials.every((e) => e.decision === 'deny')).toBe(true);
      const badQuery = await call(agent!, token, 'GET', `/v1/sandboxes/${sandboxId}/audit?limit=-1`);
      expect(badQuery.status).toBe(400);

      // A session: a shell that keeps its state between commands, each with its own output and status.
      const opened = await call(agent!, token, 'POST', `/v1/sandboxes/${sandboxId}/sessions`, {});
      expect(opened.status).toBe(201);
      const ses = opened.json['id'] as string;
      expect(await sessionRun(agent!, token, sandboxId, ses, 'cd /workspace/docs; X=kept')).toEqual({
        stdout: '',
        stderr: '',
        exitCode: 0,
      });
      expect(
        await sessionRun(agent!, token, sandboxId, ses, 'echo "in $(pwd) $X: $(cat guide.txt)"; false'),
      ).toEqual({
        stdout: 'in /workspace/docs kept: read only\n',
        stderr: '',
        exitCode: 1,
      });
      expect((await call(agent!, token, 'DELETE', `/v1/sandboxes/${sandboxId}/sessions/${ses}`)).status).toBe(
        200,
      );

      const health = await call(agent!, token, 'GET', '/v1/health');
      expect(health.json['sandboxes']).toEqual([
        { id: sandboxId, alive: true, sessions: 0, worker: { state: 'running', restarts: 0 } },
      ]);

      // Commit writes the change to the codebase on this node.
      const commit = await call(agent!, token, 'POST', `/v1/sandboxes/${sandboxId}/commit`, {});
      expect(commit.status, commit.text).toBe(200);
      expect(await readFile(join(codebase, 'readme.txt'), 'utf8')).toBe('changed\n');
      await writeFile(join(codebase, 'readme.txt'), 'hello from the codebase\n');

      // A rule change applies at once in the running container: readme.txt hidden, then visible again.
      const hide = [...RULES, { pattern: 'readme.txt', permission: 'none', priority: 50 }];
      const put = await call(agent!, token, 'PUT', `/v1/sandboxes/${sandboxId}/rules`, { rules: hide });
      expect(put.status, put.text).toBe(200);
      const gone = await exec(agent!, token, sandboxId, [
        'sh',
        '-c',
        'cat /workspace/readme.txt; ls /workspace',
      ]);
      expect(gone.stderr).toContain('No such file or directory');
      expect(gone.stdout.split('\n')).not.toContain('readme.txt');
      const bad = await call(agent!, token, 'PUT', `/v1/sandboxes/${sandboxId}/rules`, { rules: 'all' });
      expect(bad.status).toBe(400);
      expect(
        (await call(agent!, token, 'PUT', `/v1/sandboxes/${sandboxId}/rules`, { rules: RULES })).status,
      ).toBe(200);
      expect((await exec(agent!, token, sandboxId, ['cat', '/workspace/readme.txt'])).exitCode).toBe(0);

      // Detach: the view is gone from the host and af-init's connection closed, which ends the container.
      const view = join(root, 'state', 'sandboxes', sandboxId, 'view');
      expect(await isFuseMounted(view)).toBe(true);
      expect((await call(agent!, token, 'DELETE', `/v1/sandboxes/${sandboxId}`)).status).toBe(200);
      expect(await isFuseMounted(view)).toBe(false);
      expect((await call(agent!, token, 'GET', '/v1/health')).json['sandboxes']).toEqual([]);
      expect(
        (await call(agent!, token, 'POST', `/v1/sandboxes/${sandboxId}/exec`, { argv: ['true'] })).status,
      ).toBe(404);
      // The API tier then removes the placement: the container goes.
      await removeContainer(dockerHost, containers.at(-1)!);
    });

    it('an attach takes the worker the agent spawned ahead, and another is spawned for the next', async () => {
      // The agent's child processes: its idle pooled worker before any attach names it.
      const children = async (): Promise<number[]> => {
        const pid = agent!.child.pid!;
        const text = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => '');
        return text.split(/\s+/).filter(Boolean).map(Number);
      };
      const idleWorker = async (exclude: readonly number[]): Promise<number> => {
        for (let i = 0; i < 100; i++) {
          for (const pid of await children()) {
            if (exclude.includes(pid)) continue;
            const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
            if (cmdline.includes('worker')) return pid;
          }
          await sleep(100);
        }
        throw new Error('no idle worker under the agent');
      };
      const before = await idleWorker([]);
      const sandboxId = `sb_${randomUUID()}`;
      await attach(sandboxId);
      const taken = Number(
        (await readFile(join(root, 'state', 'sandboxes', sandboxId, 'worker.pid'), 'utf8')).split(' ')[0],
      );
      expect(taken).toBe(before);
      // It took on its sandbox's log at the mount, and the pool spawned the next one.
      expect((await stat(join(root, 'state', 'sandboxes', sandboxId, 'worker.log'))).isFile()).toBe(true);
      expect(await idleWorker([taken])).not.toBe(taken);
      expect((await exec(agent!, token, sandboxId, ['cat', '/workspace/readme.txt'])).stdout).toBe(
        'hello from the codebase\n',
      );
      // Its directory goes with it (the restart test below counts what a killed agent left).
      const r = await call(agent!, token, 'DELETE', `/v1/sandboxes/${sandboxId}?dropDelta=true`);
      expect(r.status, r.text).toBe(200);
      await removeContainer(dockerHost, containers.at(-1)!);
    });

    it('a restarted agent clears what a killed one left of a sandbox no longer placed here', async () => {
      const gone = `sb_${randomUUID()}`;
      const stays = `sb_${randomUUID()}`;
      await attach(gone);
      await attach(stays);
      expect((await exec(agent!, token, gone, ['sh', '-c', 'echo mine > /workspace/new.txt'])).exitCode).toBe(
        0,
      );
      expect(
        (await exec(agent!, token, stays, ['sh', '-c', 'echo kept > /workspace/new.txt'])).exitCode,
      ).toBe(0);
      const pidOf = async (id: string): Promise<number> =>
        Number((await readFile(join(root, 'state', 'sandboxes', id, 'worker.pid'), 'utf8')).split(' ')[0]);
      const workers = [await pidOf(gone), await pidOf(stays)];

      await agent!.stop('SIGKILL');
      // Its sandbox `gone` was placed elsewhere meanwhile: its container is no longer on this node.
      await removeContainer(dockerHost, containers.at(-2)!);
      await start();
      // The first test's sandbox (removed) and `gone` are cleaned up; `stays` is kept.
      expect(agent!.stderr()).toContain('cleaned up 2 sandbox(es) placed elsewhere, kept 1');

      for (const pid of workers) {
        for (let i = 0; i < 50 && (await stat(`/proc/${pid}`).catch(() => null)) !== null; i++)
          await sleep(100);
        expect(await stat(`/proc/${pid}`).catch(() => null)).toBeNull();
      }
      expect(await stat(join(root, 'state', 'sandboxes', gone)).catch(() => null)).toBeNull();
      const kept = join(root, 'state', 'sandboxes', stays);
      expect(await isFuseMounted(join(kept, 'view'))).toBe(false);
      // The sandbox still placed here keeps its delta (its changes since the last checkpoint).
      expect(JSON.stringify(await call(agent!, token, 'GET', '/v1/health'))).not.toContain(stays);
      expect((await stat(join(kept, 'delta'))).isDirectory()).toBe(true);

      // Its container was started again (af-init ended with the killed agent's connection); attached
      // again, it sees its earlier change.
      let r = { status: 0, text: '' };
      for (let i = 0; i < 50 && r.status !== 201; i++) {
        r = await call(agent!, token, 'POST', '/v1/sandboxes', {
          sandboxId: stays,
          codebasePath: codebase,
          rules: RULES,
        });
        if (r.status !== 201) await sleep(200);
      }
      expect(r.status, r.text).toBe(201);
      expect(await exec(agent!, token, stays, ['cat', '/workspace/new.txt'])).toEqual({
        stdout: 'kept\n',
        stderr: '',
        exitCode: 0,
      });
    });
  },
);
