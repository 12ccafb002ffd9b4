// Attacks on the route from the API to the node agents (serve with an orchestrator): a client without the
// API token, or naming a sandbox the API may not reach (over a codebase linked by a local process), or a
// session in such a sandbox, makes the control plane call no node agent at all; and the node agents' token never reaches an API client or
// the logs, even from a node agent (or whatever answers at its address) that echoes the request's
// Authorization header back in its error, or redirects the call elsewhere. The control plane and its HTTP
// face are the real ones, in this process; the orchestrator is a stand-in that places at once, and the
// node agent a recording HTTP server.
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane, controlPlaneBackend, createHttpServer, type HttpServer } from '@agentfense/control';
import { fakeOrchestrator, startFakeNodeAgent, type FakeNodeAgent } from '../helpers/placement-fakes.js';

const NODE_TOKEN = randomBytes(24).toString('hex');
const API_TOKEN = randomBytes(24).toString('hex');

describe('serve routing to node agents', () => {
  const elsewhereSeen: string[] = [];
  let dir: string;
  let state: FakeNodeAgent;
  let elsewhere: Server;
  let plane: ControlPlane;
  let http: HttpServer;
  let url: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'af-serve-node-agent-'));
    state = await startFakeNodeAgent();
    elsewhere = createServer((req, res) => {
      elsewhereSeen.push(`${req.url ?? ''} ${req.headers.authorization ?? ''}`);
      res.end('{}');
    });
    await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
    state.redirectTo = (elsewhere.address() as AddressInfo).port;
    plane = await ControlPlane.open({
      dataDir: join(dir, 'data'),
      workerPoolSize: 0,
      placement: {
        orchestrator: fakeOrchestrator(state.port),
        nodeAgentToken: NODE_TOKEN,
        image: 'sandbox:test',
      },
    });
    http = createHttpServer({ backend: controlPlaneBackend(plane, { ownCreated: false }), token: API_TOKEN });
    await http.app.listen({ host: '127.0.0.1', port: 0 });
    url = `http://127.0.0.1:${(http.app.server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await http.app.close();
    await state.close();
    elsewhere.close();
    await rm(dir, { recursive: true, force: true });
  });

  const api = async (method: string, path: string, body?: unknown, token: string | null = API_TOKEN) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: {
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, text: await res.text() };
  };

  it('a client without the token, or naming a sandbox the API may not reach, reaches no node agent', async () => {
    const cb = JSON.parse((await api('POST', '/v1/codebases', { name: 'app' })).text) as { id: string };
    const made = await api('POST', '/v1/sandboxes', { codebase_id: cb.id, start: true });
    expect(made.status, made.text).toBe(200);
    const visible = (JSON.parse(made.text) as { id: string }).id;
    // A sandbox over a codebase a local process linked: the API faces may not know it exists.
    const linked = await plane.linkCodebase({ path: dir });
    const hidden = (await plane.createSandbox({ codebaseId: linked.id })).id;
    await plane.startSandbox(hidden);
    expect(state.seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      'POST /v1/sandboxes',
      'POST /v1/sandboxes',
    ]);
    state.seen.length = 0;

    const attempts = [
      await api('POST', `/v1/sandboxes/${visible}/exec`, { command: 'id' }, null),
      await api('POST', `/v1/sandboxes/${visible}/exec`, { command: 'id' }, 'b'.repeat(48)),
      await api('GET', `/v1/sandboxes/${visible}/diff`, undefined, null),
      await api('DELETE', `/v1/sandboxes/${visible}`, undefined, null),
      await api('POST', `/v1/sandboxes/${hidden}/exec`, { command: 'id' }),
      await api('GET', `/v1/sandboxes/${hidden}/diff`),
      await api('POST', `/v1/sandboxes/${hidden}/commit`, {}),
      await api('DELETE', `/v1/sandboxes/${hidden}`),
    ];
    expect(attempts.map((a) => a.status)).toEqual([401, 401, 401, 401, 404, 404, 404, 404]);
    expect(state.seen.map(({ method, url, authorization }) => ({ method, url, authorization }))).toEqual([]);

    // With the token, on the sandbox it may reach, the same call goes to the node agent with its token.
    const ran = await api('POST', `/v1/sandboxes/${visible}/exec`, { command: 'id' });
    expect(ran.status, ran.text).toBe(200);
    expect(ran.text).toContain('hi');
    expect(state.seen.map(({ method, url, authorization }) => ({ method, url, authorization }))).toEqual([
      { method: 'POST', url: `/v1/sandboxes/${visible}/exec`, authorization: `Bearer ${NODE_TOKEN}` },
    ]);
  });

  it('a client naming a session it may not reach, or without the token, reaches no node agent', async () => {
    const cb = JSON.parse((await api('POST', '/v1/codebases', { name: 'app3' })).text) as { id: string };
    const made = await api('POST', '/v1/sandboxes', { codebase_id: cb.id, start: true });
    const visible = (JSON.parse(made.text) as { id: string }).id;
    const opened = await api('POST', `/v1/sandboxes/${visible}/sessions`, {});
    expect(opened.status, opened.text).toBe(200);
    const mine = (JSON.parse(opened.text) as { id: string }).id;
    // A session a local process opened in a sandbox over its own linked codebase: its id leaked, say.
    const linked = await plane.linkCodebase({ path: dir });
    const hidden = (await plane.createSandbox({ codebaseId: linked.id })).id;
    await plane.startSandbox(hidden);
    const theirs = (await plane.placedSessions!.create(hidden)).id;
    state.seen.length = 0;

    const attempts = [
      await api('GET', `/v1/sessions/${mine}`, undefined, null),
      await api('POST', `/v1/sessions/${mine}/exec`, { command: 'id' }, null),
      await api('DELETE', `/v1/sessions/${mine}`, undefined, 'c'.repeat(48)),
      await api('POST', `/v1/sandboxes/${visible}/sessions`, {}, null),
      await api('GET', `/v1/sessions/${theirs}`),
      await api('POST', `/v1/sessions/${theirs}/exec`, { command: 'id' }),
      await api('DELETE', `/v1/sessions/${theirs}`),
      await api('POST', `/v1/sandboxes/${hidden}/sessions`, {}),
      await api('GET', `/v1/sandboxes/${hidden}/sessions`),
    ];
    expect(attempts.map((a) => a.status)).toEqual([401, 401, 401, 401, 404, 404, 404, 404, 404]);
    expect(state.seen.map(({ method, url, authorization }) => ({ method, url, authorization }))).toEqual([]);

    // With the token, its own session: the command goes to the node agent, with the node agents' token.
    const ran = await api('POST', `/v1/sessions/${mine}/exec`, { command: 'id' });
    expect(ran.status, ran.text).toBe(200);
    expect(state.seen.map(({ method, url, authorization }) => ({ method, url, authorization }))).toEqual([
      {
        method: 'POST',
        url: `/v1/sandboxes/${visible}/sessions/${mine}/exec`,
        authorization: `Bearer ${NODE_TOKEN}`,
      },
    ]);
  });

  it("the node agents' token is never shown, even when a node agent echoes it or redirects", async () => {
    const cb = JSON.parse((await api('POST', '/v1/codebases', { name: 'app2' })).text) as { id: string };
    const id = (
      JSON.parse((await api('POST', '/v1/sandboxes', { codebase_id: cb.id, start: true })).text) as {
        id: string;
      }
    ).id;
    state.mode = 'echo';
    state.seen.length = 0;
    const answers = [
      await api('POST', `/v1/sandboxes/${id}/exec`, { command: 'id' }),
      await api('GET', `/v1/sandboxes/${id}/diff`),
      await api('POST', `/v1/sandboxes/${id}/commit`, {}),
    ];
    // The node agent did receive the token and sent it back in every answer.
    expect(state.seen.length).toBe(3);
    expect(state.seen.every((s) => s.authorization === `Bearer ${NODE_TOKEN}`)).toBe(true);
    for (const a of answers) {
      expect(a.status).toBe(403);
      expect(a.text).toContain('refused Bearer ***');
      expect(a.text).not.toContain(NODE_TOKEN);
    }

    state.mode = 'redirect';
    const redirected = [
      await api('POST', `/v1/sandboxes/${id}/exec`, { command: 'id' }),
      await api('GET', `/v1/sandboxes/${id}/diff`),
    ];
    for (const a of redirected) {
      expect(a.status).toBeGreaterThanOrEqual(500);
      expect(a.text).not.toContain(NODE_TOKEN);
    }
    // The redirect was not followed: nothing reached the other address.
    expect(elsewhereSeen).toEqual([]);
    state.mode = 'ok';

    await plane.close();
    const log = await readFile(join(dir, 'data', 'logs', 'control.log'), 'utf8');
    expect(log).not.toContain(NODE_TOKEN);
    expect(log).toContain('sandbox placed and attached');
  });
});
