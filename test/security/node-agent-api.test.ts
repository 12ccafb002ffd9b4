// Attack: use the node agent (root on its node) without being the API tier, or make it name a host path it
// must not. Defences (packages/node-agent/src/auth.ts, paths.ts): every /v1 route needs the bearer token
// (compared through digests), and an attach's codebase path must resolve, symlinks followed, to a
// directory strictly inside the configured codebase root, before anything is created or started; the
// sandbox id must be a plain name. The probes (/live, /ready) answer a status and nothing else.
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';
import { call, randomToken, startAgent, type AgentProcess } from '#helpers/node-agent.js';

describe('node agent API: authentication and host paths', () => {
  let root: string;
  let agent: AgentProcess;
  const token = randomToken();

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'af-node-agent-sec-'));
    await mkdir(join(root, 'codebases', 'app'), { recursive: true });
    await mkdir(join(root, 'outside'), { recursive: true });
    await writeFile(join(root, 'outside', 'private.txt'), 'not for sandboxes\n');
    // A link inside the root that leads out of it.
    await symlink(join(root, 'outside'), join(root, 'codebases', 'escape'));
    agent = await startAgent({
      stateDir: join(root, 'state'),
      codebaseRoot: join(root, 'codebases'),
      token,
      tokenFile: join(root, 'token'),
      // No engine is reached: every request here is refused before the agent looks for a container.
      dockerHost: 'unix:///nonexistent/docker.sock',
    });
  });

  afterAll(async () => {
    await agent?.stop();
    await rm(root, { recursive: true, force: true });
  });

  const attachBody = (codebasePath: string, sandboxId = `sb_${randomUUID()}`): object => ({
    sandboxId,
    codebasePath,
    rules: [{ pattern: '**', permission: 'write' }],
  });

  /** Nothing was made for any sandbox and nothing mounted by the refused requests. */
  async function nothingCreated(): Promise<void> {
    expect(await readdir(join(root, 'state', 'sandboxes')).catch(() => [])).toEqual([]);
    expect((await listMounts()).filter((m) => m.mountpoint.startsWith(root))).toEqual([]);
  }

  it('refuses every /v1 route without the token, with a wrong one, or a near miss', async () => {
    const wrong = [null, randomToken(), `${token}x`, token.slice(0, -1), token.toUpperCase()];
    const routes: [string, string, unknown][] = [
      ['GET', '/v1/health', undefined],
      ['POST', '/v1/sandboxes', attachBody(join(root, 'codebases', 'app'))],
      ['POST', `/v1/sandboxes/sb_${randomUUID()}/exec`, { argv: ['id'] }],
      ['DELETE', `/v1/sandboxes/sb_${randomUUID()}`, undefined],
      ['POST', `/v1/sandboxes/sb_${randomUUID()}/discard`, {}],
      ['POST', `/v1/sandboxes/sb_${randomUUID()}/sessions`, {}],
      ['GET', `/v1/sandboxes/sb_${randomUUID()}/sessions`, undefined],
      ['POST', `/v1/sandboxes/sb_${randomUUID()}/sessions/ses_${randomUUID()}/exec`, { command: 'id' }],
      ['DELETE', `/v1/sandboxes/sb_${randomUUID()}/sessions/ses_${randomUUID()}`, undefined],
    ];
    for (const bad of wrong) {
      for (const [method, path, body] of routes) {
        const r = await call(agent, bad, method, path, body);
        expect(r.status, `${method} ${path} with ${String(bad)}`).toBe(401);
        expect(r.json).toEqual({
          error: { code: 'AF_PERMISSION_DENIED', message: 'missing or wrong node agent token' },
        });
      }
    }
    // Basic auth or a token in another header is no token.
    const basic = await fetch(`${agent.url}/v1/health`, {
      headers: { authorization: `Basic ${Buffer.from(`x:${token}`).toString('base64')}`, 'x-token': token },
    });
    expect(basic.status).toBe(401);
    // The probes say nothing but a status.
    expect(await (await fetch(`${agent.url}/ready`)).json()).toEqual({ ready: true });
    expect(await (await fetch(`${agent.url}/live`)).json()).toEqual({ live: true });
    // The right token gets through.
    expect((await call(agent, token, 'GET', '/v1/health')).status).toBe(200);
    await nothingCreated();
  });

  it('refuses a codebase path outside the codebase root, however it is spelt', async () => {
    const outside = [
      join(root, 'outside'),
      '/etc',
      join(root, 'codebases'), // the root itself is not a codebase
      join(root, 'codebases', 'escape'), // a symlink inside the root to a directory outside
      `${join(root, 'codebases')}-sibling`,
    ];
    await mkdir(`${join(root, 'codebases')}-sibling`, { recursive: true });
    for (const path of outside) {
      const r = await call(agent, token, 'POST', '/v1/sandboxes', attachBody(path));
      expect(r.status, `${path}: ${r.text}`).toBe(403);
      expect((r.json['error'] as { code: string }).code).toBe('AF_PERMISSION_DENIED');
    }
    const malformed = [
      `${join(root, 'codebases', 'app')}/../../outside`,
      `${join(root, 'codebases')}//app`,
      'codebases/app',
      `${join(root, 'codebases', 'app')}\0`,
      `${join(root, 'codebases', 'app')}/`,
      '/',
    ];
    for (const path of malformed) {
      const r = await call(agent, token, 'POST', '/v1/sandboxes', attachBody(path));
      expect(r.status, `${JSON.stringify(path)}: ${r.text}`).toBe(400);
    }
    // A sandbox id is a directory name under the state directory: no path in it.
    for (const id of ['../../etc', 'sb_x/../../y', '.', '..', '', 'a'.repeat(200)]) {
      const r = await call(
        agent,
        token,
        'POST',
        '/v1/sandboxes',
        attachBody(join(root, 'codebases', 'app'), id),
      );
      expect(r.status, `${JSON.stringify(id)}: ${r.text}`).toBe(400);
    }
    await nothingCreated();
  });
});
