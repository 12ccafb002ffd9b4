// A placed sandbox's FUSE worker dies on its node (kill -9): the node agent notices, mounts a new worker
// over the same delta and puts the view back where the running container sees it; what the sandbox wrote
// before is there, its rules still hold, health reports the restart, and the node's other sandbox is
// served throughout. Workers that keep dying leave the sandbox failed with a reason saying what was lost,
// and an attach again brings its files back.
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  call,
  createSandboxContainer,
  exec,
  randomToken,
  removeContainer,
  startAgent,
  type AgentProcess,
} from '#helpers/node-agent.js';

const docker = inject('docker');
const dockerHost = docker.dockerHost ?? '';

const RULES = [
  { pattern: '**', permission: 'write' },
  { pattern: 'secret.txt', permission: 'none' },
];

interface Worker {
  readonly state: string;
  readonly restarts: number;
  readonly lastRestartReason?: string;
  readonly failedReason?: string;
}
interface SandboxHealth {
  readonly id: string;
  readonly alive: boolean;
  readonly sessions: number;
  readonly worker: Worker;
}

describe.skipIf(docker.unavailable !== null)(
  `node agent: a placed sandbox's worker is supervised${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    let root: string;
    let codebase: string;
    let agent: AgentProcess | undefined;
    const token = randomToken();
    const containers: string[] = [];

    const attach = async (sandboxId: string): Promise<void> => {
      const r = await call(agent!, token, 'POST', '/v1/sandboxes', {
        sandboxId,
        codebasePath: codebase,
        rules: RULES,
      });
      expect(r.status, r.text).toBe(201);
    };
    const placed = async (): Promise<string> => {
      const sandboxId = `sb_${randomUUID()}`;
      containers.push(await createSandboxContainer(dockerHost, sandboxId));
      await attach(sandboxId);
      return sandboxId;
    };
    const workerPid = async (sandboxId: string): Promise<number> =>
      Number(
        (await readFile(join(root, 'state', 'sandboxes', sandboxId, 'worker.pid'), 'utf8')).split(' ')[0],
      );
    const health = async (sandboxId: string): Promise<SandboxHealth | undefined> => {
      const r = await call(agent!, token, 'GET', '/v1/health');
      expect(r.status).toBe(200);
      return (r.json['sandboxes'] as SandboxHealth[]).find((s) => s.id === sandboxId);
    };
    /** Polls health until `check` holds for the sandbox (a restart is a spawn and a mount away). */
    const healthWhen = async (
      sandboxId: string,
      check: (s: SandboxHealth) => boolean,
    ): Promise<SandboxHealth> => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const s = await health(sandboxId);
        if (s !== undefined && check(s)) return s;
        if (Date.now() > deadline) throw new Error(`health never matched: ${JSON.stringify(s)}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    const cat = (sandboxId: string, path: string): ReturnType<typeof exec> =>
      exec(agent!, token, sandboxId, ['cat', `/workspace/${path}`]);

    beforeAll(async () => {
      root = await mkdtemp(join(tmpdir(), 'af-node-supervision-'));
      codebase = join(root, 'codebases', 'app');
      await mkdir(codebase, { recursive: true });
      await writeFile(join(codebase, 'readme.txt'), 'hello from the codebase\n');
      await writeFile(join(codebase, 'secret.txt'), 'the secret\n');
      agent = await startAgent({
        stateDir: join(root, 'state'),
        codebaseRoot: join(root, 'codebases'),
        token,
        tokenFile: join(root, 'token'),
        dockerHost,
      });
    });

    afterAll(async () => {
      await agent?.stop();
      for (const id of containers) await removeContainer(dockerHost, id);
      await rm(root, { recursive: true, force: true });
    });

    it('replaces a killed worker over the same delta and puts the view back in the container', async () => {
      const sandboxId = await placed();
      const other = await placed();
      const wrote = await exec(agent!, token, sandboxId, ['sh', '-c', 'echo kept > /workspace/kept.txt']);
      expect(wrote.exitCode).toBe(0);
      // A rule changed at run time must hold for the replacement too.
      const ruled = await call(agent!, token, 'PUT', `/v1/sandboxes/${sandboxId}/rules`, {
        rules: [...RULES, { pattern: 'readme.txt', permission: 'none' }],
      });
      expect(ruled.status, ruled.text).toBe(200);
      const opened = await call(agent!, token, 'POST', `/v1/sandboxes/${sandboxId}/sessions`, {});
      expect(opened.status).toBe(201);

      const killed = await workerPid(sandboxId);
      process.kill(killed, 'SIGKILL');
      // The node's other sandbox is served while this one's worker is replaced.
      expect(await cat(other, 'readme.txt')).toEqual({
        stdout: 'hello from the codebase\n',
        stderr: '',
        exitCode: 0,
      });

      const after = await healthWhen(
        sandboxId,
        (s) => s.worker.restarts === 1 && s.worker.state === 'running',
      );
      expect(after.alive).toBe(true);
      expect(after.worker.lastRestartReason).toMatch(/exited.*SIGKILL/);
      // A shell's working directory was in the dead view: its session ended.
      expect(after.sessions).toBe(0);
      expect(await workerPid(sandboxId)).not.toBe(killed);

      // The running container sees the view again: what it wrote, the codebase, and the rules.
      expect(await cat(sandboxId, 'kept.txt')).toEqual({ stdout: 'kept\n', stderr: '', exitCode: 0 });
      expect((await cat(sandboxId, 'readme.txt')).exitCode).not.toBe(0);
      expect((await cat(sandboxId, 'secret.txt')).stderr).toContain('No such file or directory');
      const again = await exec(agent!, token, sandboxId, ['sh', '-c', 'echo more >> /workspace/kept.txt']);
      expect(again.exitCode).toBe(0);
      const file = await call(agent!, token, 'GET', `/v1/sandboxes/${sandboxId}/files?path=kept.txt`);
      expect(Buffer.from(file.json['data'] as string, 'base64').toString()).toBe('kept\nmore\n');
      expect(agent!.child.exitCode).toBeNull();
    }, 120_000);

    it('a worker that keeps dying leaves the sandbox failed, saying what was lost; an attach brings it back', async () => {
      const sandboxId = await placed();
      const other = await placed();
      const wrote = await exec(agent!, token, sandboxId, ['sh', '-c', 'echo kept > /workspace/kept.txt']);
      expect(wrote.exitCode).toBe(0);
      // Supervision gives up at the third failure within a minute, as on a single host.
      for (let restarts = 1; restarts <= 2; restarts++) {
        process.kill(await workerPid(sandboxId), 'SIGKILL');
        await healthWhen(sandboxId, (s) => s.worker.restarts === restarts && s.worker.state === 'running');
      }
      process.kill(await workerPid(sandboxId), 'SIGKILL');
      const failed = await healthWhen(sandboxId, (s) => s.worker.state === 'failed');
      expect(failed.alive).toBe(false);
      expect(failed.worker.failedReason).toMatch(/3 worker failures.*nothing written to the delta is lost/);
      const refused = await call(agent!, token, 'GET', `/v1/sandboxes/${sandboxId}/files?path=kept.txt`);
      expect(refused.status).not.toBe(200);
      expect(refused.text).toContain('ERROR');
      expect(await cat(other, 'readme.txt')).toMatchObject({ exitCode: 0 });
      expect(agent!.child.exitCode).toBeNull();

      // What the control plane does with a sandbox not alive: detach, attach again (once the engine has
      // started its container again: af-init ended with the detach); nothing was lost.
      expect((await call(agent!, token, 'DELETE', `/v1/sandboxes/${sandboxId}`)).status).toBe(200);
      let r = { status: 0, text: '' };
      for (let i = 0; i < 100 && r.status !== 201; i++) {
        r = await call(agent!, token, 'POST', '/v1/sandboxes', {
          sandboxId,
          codebasePath: codebase,
          rules: RULES,
        });
        if (r.status !== 201) await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(r.status, r.text).toBe(201);
      expect(await cat(sandboxId, 'kept.txt')).toEqual({ stdout: 'kept\n', stderr: '', exitCode: 0 });
      expect((await health(sandboxId))?.worker).toEqual({ state: 'running', restarts: 0 });
    }, 180_000);
  },
);
