// A control plane opened with `placement` (what `serve --orchestrator` uses), with a stand-in orchestrator
// and a recording node agent: what a caller sees of each step of the orchestrated path. Not placed yet,
// a placement the orchestrator refuses, a node agent that does not answer (and the call after it, located
// afresh), sessions opened through one replica and used through another, a sandbox lost and placed again
// (attached again, its status saying what was lost), calls that are not routed, stop and delete.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ControlPlane, RemoteSandboxError, controlPlaneBackend } from '@agentfense/control';
import {
  fakeOrchestrator,
  startFakeNodeAgent,
  type FakeNodeAgent,
  type FakeOrchestrator,
} from '../helpers/placement-fakes.js';

const TOKEN = randomBytes(24).toString('hex');

async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200 && !(await check()); i++) await new Promise((r) => setTimeout(r, 25));
}

describe('a control plane placing sandboxes through an orchestrator', () => {
  let dir: string;
  let agent: FakeNodeAgent;
  let orchestrator: FakeOrchestrator;
  let plane: ControlPlane;
  let codebaseId: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'af-placement-'));
    agent = await startFakeNodeAgent();
    orchestrator = fakeOrchestrator(agent.port);
    plane = await ControlPlane.open({
      dataDir: join(dir, 'data'),
      workerPoolSize: 0,
      placement: { orchestrator, nodeAgentToken: TOKEN, image: 'sandbox:test', readyTimeoutMs: 2000 },
    });
    codebaseId = (await plane.createCodebase({ name: 'app' })).id;
  });

  afterAll(async () => {
    await plane.close();
    await agent.close();
    await rm(dir, { recursive: true, force: true });
  });

  beforeEach(() => {
    agent.seen.length = 0;
    agent.mode = 'ok';
    agent.sessions.clear();
    orchestrator.failing = 'no';
    orchestrator.nodeAgentPort = agent.port;
    agent.auditEvents = [];
  });

  const reasonOf = (err: unknown): string | undefined =>
    err instanceof RemoteSandboxError ? `${err.code} ${err.reason}` : String(err);

  it('places on start, routes commands, and says why a call cannot be served', async () => {
    const sb = await plane.createSandbox({ codebaseId });
    // Created, not started: nothing placed, nothing to call.
    expect(reasonOf(await plane.run(sb.id, 'true').catch((e: unknown) => e))).toBe(
      'AF_WRONG_STATE not-placed',
    );
    expect(agent.seen).toEqual([]);

    const started = await plane.startSandbox(sb.id);
    expect(started.state).toBe('RUNNING');
    expect(started.stateReason).toBe('placed on node n1');
    expect(agent.seen.map((s) => `${s.method} ${s.url} ${s.authorization ?? ''}`)).toEqual([
      `POST /v1/sandboxes Bearer ${TOKEN}`,
    ]);
    const run = await plane.run(sb.id, 'echo hi');
    expect(run.stdout).toBe('hi\n');
    expect(run.exitCode).toBe(0);

    // A library Session object is this process's shell: a placed sandbox's sessions are opened through
    // the faces' backend (below), and checkpoints are not sent to node agents (yet): said so.
    expect(reasonOf(await plane.createSession(sb.id).catch((e: unknown) => e))).toBe(
      'AF_WRONG_STATE not-routed',
    );

    // Its node agent stops answering: unreachable, the token in no message; the next call locates again.
    // The watch reports it not ready (its location is dropped); it is found next with a dead node agent.
    orchestrator.nodeAgentPort = 1;
    orchestrator.report({ state: 'pending', sandboxId: sb.id, detail: 'node not answering' });
    await new Promise((r) => setTimeout(r, 200));
    const unreachable = await plane.run(sb.id, 'true').catch((e: unknown) => e);
    expect(reasonOf(unreachable)).toBe('AF_UNAVAILABLE node-agent-unreachable');
    expect(String((unreachable as Error).message)).toContain('127.0.0.1:1');
    expect(JSON.stringify(unreachable)).not.toContain(TOKEN);
    orchestrator.nodeAgentPort = agent.port;
    expect((await plane.run(sb.id, 'echo again')).exitCode).toBe(0);
    // Discard drops the delta's changes on the node (all, or some paths).
    agent.seen.length = 0;
    await plane.discard(sb.id);
    await plane.discard(sb.id, { paths: ['/src'] });
    expect(agent.seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      `POST /v1/sandboxes/${sb.id}/discard`,
      `POST /v1/sandboxes/${sb.id}/discard`,
    ]);

    // Stop: detached (the delta kept on the node), placement removed; delete: the delta dropped.
    agent.seen.length = 0;
    expect((await plane.stopSandbox(sb.id)).state).toBe('STOPPED');
    expect(orchestrator.placed.has(sb.id)).toBe(false);
    await plane.startSandbox(sb.id);
    await plane.destroySandbox(sb.id);
    expect(agent.seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      `DELETE /v1/sandboxes/${sb.id}`,
      'POST /v1/sandboxes',
      `DELETE /v1/sandboxes/${sb.id}?dropDelta=true`,
    ]);
    await expect(plane.getSandbox(sb.id)).rejects.toThrow(/not found/i);
  });

  it('a session opened through one replica is used and closed through another; its state is on the node', async () => {
    // A second replica over the same records: it has never seen the session.
    const other = await ControlPlane.open({
      dataDir: join(dir, 'data'),
      workerPoolSize: 0,
      placement: { orchestrator, nodeAgentToken: TOKEN, image: 'sandbox:test', readyTimeoutMs: 2000 },
    });
    try {
      const [a, b] = [controlPlaneBackend(plane), controlPlaneBackend(other)];
      const sb = await plane.createSandbox({ codebaseId, env: { FROM_SANDBOX: '1' } });
      expect(await a.listSessions(sb.id)).toEqual([]); // not placed yet: none, no call
      await plane.startSandbox(sb.id);
      agent.seen.length = 0;
      const opened = await a.createSession(sb.id, { shell: '/bin/sh' });
      expect(opened).toMatchObject({ sandboxId: sb.id, status: 'open', shell: '/bin/sh' });
      expect((await b.getSession(opened.id)).id).toBe(opened.id);
      expect((await b.sessionExec(opened.id, 'cd /workspace/src', {})).exitCode).toBe(0);
      const said = await a.sessionExec(opened.id, 'pwd', {});
      expect(said.stdout.toString()).toBe('/workspace/src pwd\n');
      expect((await b.listSessions(sb.id)).map((s) => s.id)).toEqual([opened.id]);
      await b.closeSession(opened.id);
      await expect(a.getSession(opened.id)).rejects.toThrow(/not found/);
      expect(agent.seen.map((s) => `${s.method} ${s.url}`)).toEqual([
        `POST /v1/sandboxes/${sb.id}/sessions`,
        `GET /v1/sandboxes/${sb.id}/sessions/${opened.id}`,
        `POST /v1/sandboxes/${sb.id}/sessions/${opened.id}/exec`,
        `POST /v1/sandboxes/${sb.id}/sessions/${opened.id}/exec`,
        `GET /v1/sandboxes/${sb.id}/sessions`,
        `DELETE /v1/sandboxes/${sb.id}/sessions/${opened.id}`,
      ]);

      // A session its node no longer has (the shell exited, the node was lost) is not found, and forgotten.
      const gone = await a.createSession(sb.id, {});
      agent.sessions.clear();
      await expect(b.sessionExec(gone.id, 'true', {})).rejects.toThrow(/not found/);
      agent.seen.length = 0;
      await expect(a.getSession(gone.id)).rejects.toThrow(/not found/);
      expect(agent.seen).toEqual([]);
      await plane.destroySandbox(sb.id);
    } finally {
      await other.close();
    }
  });

  it('a placement the orchestrator gives up on fails the start, and nothing stays placed', async () => {
    const sb = await plane.createSandbox({ codebaseId });
    orchestrator.failing = 'lost';
    const failed = await plane.startSandbox(sb.id).catch((e: unknown) => e);
    expect(reasonOf(failed)).toBe('AF_UNAVAILABLE placement-failed');
    const info = await plane.getSandbox(sb.id);
    expect(info.state).toBe('ERROR');
    expect(info.stateReason).toContain('lost (failed): refused');
    expect(orchestrator.placed.has(sb.id)).toBe(false);
    expect(agent.seen).toEqual([]);
    // Started again once the orchestrator places it: ERROR → RUNNING.
    orchestrator.failing = 'no';
    expect((await plane.startSandbox(sb.id)).state).toBe('RUNNING');
    await plane.destroySandbox(sb.id);
  });

  it("a placed sandbox's rules change on its node; its network policy is refused, not only recorded", async () => {
    const sb = await plane.createSandbox({ codebaseId });
    await plane.startSandbox(sb.id);
    agent.seen.length = 0;
    const hide = [
      { pattern: '**', permission: 'read' as const },
      { pattern: 'secret/**', permission: 'none' as const },
    ];
    const changed = await plane.setRules(sb.id, { rules: hide });
    expect(changed.rules.map((r) => [r.pattern, r.permission])).toEqual([
      ['**', 'read'],
      ['secret/**', 'none'],
    ]);
    expect(agent.seen.map((s) => `${s.method} ${s.url}`)).toEqual([`PUT /v1/sandboxes/${sb.id}/rules`]);
    expect(JSON.parse(agent.seen[0]!.body)).toEqual({ rules: changed.rules });
    // A network policy the node would not enforce (its sandboxes have no network) is refused, and the
    // record keeps what it had.
    const refused = await plane.setNetwork(sb.id, true).catch((e: unknown) => e);
    expect(reasonOf(refused)).toBe('AF_WRONG_STATE not-routed');
    expect(String((refused as Error).message)).toContain('network');
    expect((await plane.getSandbox(sb.id)).networkPolicy).toEqual(sb.networkPolicy);
    // Its node agent not answering: the change fails and the record keeps the rules in force.
    orchestrator.nodeAgentPort = 1;
    orchestrator.report({ state: 'pending', sandboxId: sb.id, detail: 'node not answering' });
    await new Promise((r) => setTimeout(r, 200));
    const failed = await plane.setRules(sb.id, { preset: 'read-only' }).catch((e: unknown) => e);
    expect(reasonOf(failed)).toBe('AF_UNAVAILABLE node-agent-unreachable');
    expect((await plane.getSandbox(sb.id)).rules).toEqual(changed.rules);
    orchestrator.nodeAgentPort = agent.port;
    // Stopped, it has no node: the record alone changes, and the next start attaches with it.
    await plane.stopSandbox(sb.id);
    agent.seen.length = 0;
    await plane.setRules(sb.id, { preset: 'read-only' });
    await plane.startSandbox(sb.id);
    expect(agent.seen.map((s) => `${s.method} ${s.url}`)).toEqual(['POST /v1/sandboxes']);
    const attached = JSON.parse(agent.seen[0]!.body) as { rules: unknown };
    expect(attached.rules).toEqual((await plane.getSandbox(sb.id)).rules);
    await plane.destroySandbox(sb.id);
  });

  it("a placed sandbox's audit trail is read from its node, which audits allowed accesses when asked", async () => {
    const sb = await plane.createSandbox({ codebaseId, auditAllowed: true });
    await plane.startSandbox(sb.id);
    expect(JSON.parse(agent.seen[0]!.body)).toMatchObject({ sandboxId: sb.id, auditAllowed: true });
    const denial = {
      seq: 1,
      time: 1_700_000_000_000,
      op: 'open',
      path: '/secret/key',
      decision: 'deny',
      permission: 'none',
      errno: 'ENOENT',
    };
    agent.auditEvents = [denial];
    agent.seen.length = 0;
    expect(await plane.audit(sb.id, { decision: 'deny', limit: 5 })).toEqual([denial]);
    expect(agent.seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      `GET /v1/sandboxes/${sb.id}/audit?decision=deny&limit=5`,
    ]);
    // No policy point runs for a placed sandbox (it has no network): no records, and no node is asked.
    agent.seen.length = 0;
    expect(await plane.audit(sb.id, { kind: 'network' })).toEqual([]);
    expect(agent.seen).toEqual([]);
    // Stopped, its trail stays on the node it ran on: the read says it is not placed.
    await plane.stopSandbox(sb.id);
    expect(reasonOf(await plane.audit(sb.id).catch((e: unknown) => e))).toBe('AF_WRONG_STATE not-placed');
    await plane.destroySandbox(sb.id);
  });

  it('a sandbox lost and placed again is attached again, its status saying what was lost', async () => {
    const sb = await plane.createSandbox({ codebaseId });
    await plane.startSandbox(sb.id);
    agent.seen.length = 0;
    orchestrator.report({
      state: 'lost',
      sandboxId: sb.id,
      reason: 'node-lost',
      nodeName: 'n1',
      detail: 'its processes, sessions and changes since the last commit',
      replaced: true,
    });
    await until(
      async () => (await plane.getSandbox(sb.id)).stateReason?.includes('being placed again') === true,
    );
    expect((await plane.getSandbox(sb.id)).stateReason).toBe(
      'lost on node n1 (node-lost): its processes, sessions and changes since the last commit; being placed again',
    );
    // The new node's agent already holds a stale attach (the same node agent here): detached, attached.
    agent.mode = 'already-attached';
    orchestrator.report({ state: 'ready', sandboxId: sb.id, nodeName: 'n2', podIP: '10.0.0.3' });
    await until(async () => (await plane.getSandbox(sb.id)).stateReason?.includes('attached again') === true);
    expect((await plane.getSandbox(sb.id)).stateReason).toBe(
      'lost on node n1 (node-lost): its processes, sessions and changes since the last commit; attached again on node n2',
    );
    expect(agent.seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      'POST /v1/sandboxes',
      'GET /v1/health',
      `DELETE /v1/sandboxes/${sb.id}`,
      'POST /v1/sandboxes',
    ]);

    // Lost again; reported ready before its container reached the new node: the attach is tried again.
    orchestrator.report({
      state: 'lost',
      sandboxId: sb.id,
      reason: 'node-lost',
      nodeName: 'n2',
      detail: 'its processes',
      replaced: true,
    });
    await until(
      async () => (await plane.getSandbox(sb.id)).stateReason?.startsWith('lost on node n2') === true,
    );
    agent.seen.length = 0;
    agent.mode = 'container-not-there';
    orchestrator.report({ state: 'ready', sandboxId: sb.id, nodeName: 'n3', podIP: '10.0.0.4' });
    await until(async () => (await plane.getSandbox(sb.id)).stateReason?.includes('attached again') === true);
    expect((await plane.getSandbox(sb.id)).stateReason).toBe(
      'lost on node n2 (node-lost): its processes; attached again on node n3',
    );
    expect(agent.seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      'POST /v1/sandboxes',
      'POST /v1/sandboxes',
    ]);
    await plane.destroySandbox(sb.id);
  });
});
