// Real sandboxes through the HTTP API (`agentfense serve` as a process, bwrap, FUSE): the full flow from
// an empty codebase to a committed change, streaming exec, sessions, audit and logs, cancellation when a
// client goes away, and a shutdown that leaves no mount and no process behind.
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call --
   Answers are parsed JSON (`any`); each one's shape is checked against the served OpenAPI schema (check()). */
import { describe, expect, it } from 'vitest';
import {
  bearer,
  client,
  expectError,
  descendantsOf,
  mountsUnder,
  processesMentioning,
  startServer,
  stillAlive,
  stopAndCheck,
  useServer,
} from '../helpers/http-fixture.js';

const api = useServer('af-http-flow-');
const { call, check } = api;

/** A codebase with a few files, and a started sandbox over it under `permissions` (agent-safe if absent). */
async function runningSandbox(permissions?: unknown[]): Promise<{ cb: string; sb: string }> {
  const cb = (await call('POST', '/v1/codebases', { name: 'demo', owner_id: 'flow' })).json.id as string;
  for (const [path, content] of [
    ['src/app.py', 'print("hello")\n'],
    ['README.md', '# demo\n'],
    ['secrets/token.txt', 'hunter2\n'],
  ] as const) {
    expect((await call('PUT', `/v1/codebases/${cb}/files/${path}`, content)).status).toBe(200);
  }
  const created = await call('POST', '/v1/sandboxes', {
    codebase_id: cb,
    ...(permissions === undefined ? {} : { permissions }),
    labels: { suite: 'flow' },
    start: true,
  });
  expect(created.status, created.text).toBe(200);
  check('CreateSandbox', created);
  expect(created.json.status).toBe('SANDBOX_STATUS_RUNNING');
  return { cb, sb: created.json.id as string };
}

async function destroy(ids: { cb: string; sb: string }): Promise<void> {
  expect((await call('DELETE', `/v1/sandboxes/${ids.sb}`)).json).toEqual({});
  expect((await call('DELETE', `/v1/codebases/${ids.cb}`)).json).toEqual({});
}

/** Reads an NDJSON response into its lines. */
async function ndjson(response: Response): Promise<Record<string, unknown>[]> {
  const text = await response.text();
  expect(text.endsWith('\n')).toBe(true);
  return text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('full flow', () => {
  it('create codebase → upload → create sandbox → exec → diff → commit → delete', async () => {
    const ids = await runningSandbox([
      { pattern: '**', permission: 'read' },
      { pattern: '/src/', permission: 'PERMISSION_WRITE', priority: 10 },
      { pattern: '/secrets/', type: 'directory', permission: 'none', priority: 100 },
    ]);
    const { sb, cb } = ids;
    const got = await call('GET', `/v1/sandboxes/${sb}`);
    check('GetSandbox', got);
    expect(got.json).toMatchObject({
      id: sb,
      codebaseId: cb,
      status: 'SANDBOX_STATUS_RUNNING',
      labels: { suite: 'flow' },
    });

    const exec = await call('POST', `/v1/sandboxes/${sb}/exec`, {
      command: 'cat src/app.py; ls -a; ls secrets 2>&1; echo "$GREETING" >&2; pwd',
      env: { GREETING: 'hi there' },
      timeout: 30,
    });
    expect(exec.status, exec.text).toBe(200);
    check('Exec', exec);
    expect(exec.json).toMatchObject({
      exitCode: 0,
      timedOut: false,
      stderr: 'hi there\n',
      encoding: 'utf8',
    });
    expect(exec.json.stdout).toContain('print("hello")');
    expect(exec.json.stdout).toContain('README.md');
    expect(exec.json.stdout).not.toMatch(/^secrets$/m);
    expect(exec.json.stdout).toMatch(/No such file or directory/);
    expect(exec.json.stdout.trim().endsWith('/workspace')).toBe(true);
    expect(exec.json.duration).toMatch(/^\d+(\.\d+)?s$/);

    // Writes: allowed in /src, refused elsewhere; argv form, stdin, workdir.
    const write = await call('POST', `/v1/sandboxes/${sb}/exec`, {
      command: ['sh', '-c', 'cat > app.py && echo done; echo x > ../README.md'],
      stdin: 'print("changed")\n',
      workdir: '/workspace/src',
    });
    expect(write.json.stdout).toBe('done\n');
    expect(write.json.stderr).toMatch(/Permission denied|Read-only/);
    expect(write.json.exitCode).not.toBe(0);

    const changes = await call('GET', `/v1/sandboxes/${sb}/changes`);
    check('ListChanges', changes);
    expect(changes.json.changes).toEqual([
      {
        path: '/src/app.py',
        kind: 'modified',
        type: 'file',
        size: '17',
        mode: 0o644,
        oldMode: 0o644,
        target: null,
      },
    ]);
    const diff = await call('GET', `/v1/sandboxes/${sb}/diff`);
    check('Diff', diff);
    expect(diff.json.diff).toContain('-print("hello")');
    expect(diff.json.diff).toContain('+print("changed")');
    expect((await call('GET', `/v1/sandboxes/${sb}/diff?paths=/README.md`)).json.diff).toBe('');

    const commit = await call('POST', `/v1/sandboxes/${sb}/commit`, { mode: 'COMMIT_MODE_DETECT_CONFLICTS' });
    expect(commit.status, commit.text).toBe(200);
    check('Commit', commit);
    expect(commit.json).toEqual({
      applied: [
        {
          path: '/src/app.py',
          kind: 'modified',
          type: 'file',
          size: '17',
          mode: 0o644,
          oldMode: 0o644,
          target: null,
        },
      ],
      conflicts: [],
      skipped: [],
      changed: [],
      interrupted: '',
    });
    const download = await fetch(`${api.served.url}/v1/codebases/${cb}/files/src/app.py`, {
      headers: bearer(api.served),
    });
    expect(await download.text()).toBe('print("changed")\n');
    expect((await call('GET', `/v1/sandboxes/${sb}/changes`)).json.changes).toEqual([]);

    // Discard throws away what is not committed.
    await call('POST', `/v1/sandboxes/${sb}/exec`, { command: 'echo tmp > src/tmp.txt' });
    expect((await call('GET', `/v1/sandboxes/${sb}/changes`)).json.changes).toHaveLength(1);
    const discard = await call('POST', `/v1/sandboxes/${sb}/discard`);
    check('Discard', discard);
    expect((await call('GET', `/v1/sandboxes/${sb}/changes`)).json.changes).toEqual([]);

    // The audit trail has the denial; the log has the worker's lines.
    const audit = await call('GET', `/v1/sandboxes/${sb}/audit?decision=deny`);
    check('Audit', audit);
    expect(audit.json.events.length).toBeGreaterThan(0);
    expect(audit.json.events[0]).toMatchObject({
      decision: 'deny',
      permission: expect.stringMatching(/^PERMISSION_/),
    });
    const logs = await call('GET', `/v1/sandboxes/${sb}/logs?tail=5`);
    check('Logs', logs);
    expect(logs.json.lines.length).toBeGreaterThan(0);
    expect(logs.json.lines.length).toBeLessThanOrEqual(5);
    expect(() => JSON.parse(logs.json.lines[0] as string) as unknown).not.toThrow();

    // Stop and start again: the sandbox comes back RUNNING.
    const stopped = await call('POST', `/v1/sandboxes/${sb}/stop`);
    check('StopSandbox', stopped);
    expect(stopped.json).toMatchObject({ status: 'SANDBOX_STATUS_STOPPED', stoppedAt: expect.any(String) });
    expectError(await call('POST', `/v1/sandboxes/${sb}/exec`, { command: 'true' }), 400, 'AF_WRONG_STATE');
    // A repeated stop is refused as the original refuses it (FAILED_PRECONDITION), and changes nothing.
    expectError(await call('POST', `/v1/sandboxes/${sb}/stop`), 400, 'AF_WRONG_STATE', /not running/);
    expect((await call('GET', `/v1/sandboxes/${sb}`)).json.status).toBe('SANDBOX_STATUS_STOPPED');
    const started = await call('POST', `/v1/sandboxes/${sb}/start`);
    check('StartSandbox', started);
    expect(started.json.status).toBe('SANDBOX_STATUS_RUNNING');
    const again = await call('POST', `/v1/sandboxes/${sb}/start`);
    expectError(again, 400, 'AF_WRONG_STATE', /already running/);
    check('StartSandbox', again);
    expect((await call('POST', `/v1/sandboxes/${sb}/exec`, { command: 'cat src/app.py' })).json.stdout).toBe(
      'print("changed")\n',
    );

    const destroyed = await call('DELETE', `/v1/sandboxes/${sb}`);
    check('DestroySandbox', destroyed);
    expect(await mountsUnder(api.served.dataDir)).toEqual([]);
    expect((await call('GET', `/v1/sandboxes/${sb}`)).status).toBe(404);
    expect((await call('DELETE', `/v1/codebases/${cb}`)).json).toEqual({});
  });

  it('reports timeouts and exit statuses, and exact bytes in base64', async () => {
    const ids = await runningSandbox();
    const timedOut = await call('POST', `/v1/sandboxes/${ids.sb}/exec`, {
      command: 'sleep 30',
      timeout: '0.5s',
    });
    // DEADLINE_EXCEEDED, as the original answers; what the result said is in the ErrorInfo metadata.
    expectError(timedOut, 504, 'AF_TIMEOUT', /timed out/);
    check('Exec', timedOut);
    expect(timedOut.json.details[0].metadata).toMatchObject({ timedOut: 'true', exitCode: 'null' });
    expect(Number(timedOut.json.details[0].metadata.durationMs)).toBeLessThan(10_000);
    expect((await call('POST', `/v1/sandboxes/${ids.sb}/exec`, { command: 'exit 7' })).json.exitCode).toBe(7);
    const bytes = await call('POST', `/v1/sandboxes/${ids.sb}/exec`, {
      command: "printf '\\377\\000\\001'",
      output_encoding: 'base64',
    });
    check('Exec', bytes);
    expect(Buffer.from(bytes.json.stdout as string, 'base64')).toEqual(Buffer.from([0xff, 0, 1]));
    await destroy(ids);
  });
});

describe('streaming exec', () => {
  it('streams output as NDJSON lines, then one final line with the status', async () => {
    const ids = await runningSandbox();
    const response = await fetch(`${api.served.url}/v1/sandboxes/${ids.sb}/exec/stream`, {
      method: 'POST',
      headers: { ...bearer(api.served), 'content-type': 'application/json' },
      body: JSON.stringify({ command: 'echo one; sleep 0.3; echo two >&2; printf "\\303\\251"; exit 3' }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/x-ndjson');
    const lines = await ndjson(response);
    const final = lines.at(-1) as Record<string, unknown>;
    expect(final).toMatchObject({ done: true, exitCode: 3, timedOut: false });
    const chunks = lines.slice(0, -1) as { stream: string; data: string }[];
    for (const chunk of chunks) expect(['stdout', 'stderr']).toContain(chunk.stream);
    const joined = (stream: string): string =>
      Buffer.concat(
        chunks.filter((c) => c.stream === stream).map((c) => Buffer.from(c.data, 'base64')),
      ).toString();
    expect(joined('stdout')).toBe('one\né');
    expect(joined('stderr')).toBe('two\n');
    // utf8 output: text chunks, never a split character.
    const text = await ndjson(
      await fetch(`${api.served.url}/v1/sandboxes/${ids.sb}/exec/stream`, {
        method: 'POST',
        headers: { ...bearer(api.served), 'content-type': 'application/json' },
        body: JSON.stringify({
          command: 'printf "h\\303"; sleep 0.2; printf "\\251!"',
          output_encoding: 'utf8',
        }),
      }),
    );
    expect(
      text
        .filter((l) => l.stream === 'stdout')
        .map((l) => l.data)
        .join(''),
    ).toBe('hé!');
    await destroy(ids);
  });

  it("follows the sandbox's log as NDJSON until the sandbox is destroyed", async () => {
    expect(
      (await call('GET', '/v1/sandboxes/sb_00000000-0000-4000-8000-000000000000/logs/stream')).status,
    ).toBe(404);
    const ids = await runningSandbox();
    const response = await fetch(`${api.served.url}/v1/sandboxes/${ids.sb}/logs/stream?tail=5`, {
      headers: bearer(api.served),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/x-ndjson');
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    const lines: Record<string, unknown>[] = [];
    let pending = '';
    let ended = false;
    const readUntil = async (pred: (l: Record<string, unknown>) => boolean): Promise<void> => {
      while (!lines.some(pred) && !ended) {
        const chunk = (await reader.read()) as { done: boolean; value?: Uint8Array };
        if (chunk.done) ended = true;
        pending += decoder.decode(chunk.value, { stream: !chunk.done });
        for (let i = pending.indexOf('\n'); i >= 0; i = pending.indexOf('\n')) {
          lines.push(JSON.parse(pending.slice(0, i)) as Record<string, unknown>);
          pending = pending.slice(i + 1);
        }
      }
    };
    const msgOf = (l: Record<string, unknown>): unknown =>
      typeof l.line === 'string' ? (JSON.parse(l.line) as { msg?: unknown }).msg : undefined;

    // The tail first: what the worker has logged so far ends with 'mounted'.
    await readUntil((l) => msgOf(l) === 'mounted');
    const before = lines.length;
    // Then what the worker logs while we watch: a discard is logged as 'discard'.
    expect((await call('POST', `/v1/sandboxes/${ids.sb}/discard`)).status).toBe(200);
    await readUntil((l) => msgOf(l) === 'discard');
    expect(lines.slice(before).map(msgOf)).toContain('discard');
    // Destroying the sandbox ends the stream with a final line.
    await destroy(ids);
    await readUntil((l) => l.done === true);
    expect(lines.at(-1)).toEqual({ done: true, reason: 'sandbox destroyed' });
    await readUntil(() => false); // and the response ends
    expect(ended).toBe(true);
  });

  it('kills the command when the client disconnects', async () => {
    const ids = await runningSandbox();
    const marker = `af-http-cancel-${process.pid}`;
    const controller = new AbortController();
    const response = await fetch(`${api.served.url}/v1/sandboxes/${ids.sb}/exec/stream`, {
      method: 'POST',
      headers: { ...bearer(api.served), 'content-type': 'application/json' },
      // The marker is in the command text, so in the argv of bwrap and of the sandboxed shell.
      body: JSON.stringify({ command: `echo started; sleep 300; echo ${marker}` }),
      signal: controller.signal,
    });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read(); // the first chunk: the command is running
    expect((await processesMentioning(marker)).length).toBeGreaterThan(0);
    controller.abort();
    const deadline = Date.now() + 10_000;
    while ((await processesMentioning(marker)).length > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(await processesMentioning(marker)).toEqual([]);
    await destroy(ids);
  });
});

describe('sessions', () => {
  it('create → exec keeps state → list/get → delete', async () => {
    const ids = await runningSandbox();
    const created = await call('POST', `/v1/sandboxes/${ids.sb}/sessions`, {
      shell: '/bin/sh',
      env: { A: '1' },
    });
    expect(created.status, created.text).toBe(200);
    check('CreateSession', created);
    const ses = created.json.id as string;
    expect(created.json).toMatchObject({
      sandboxId: ids.sb,
      status: 'SESSION_STATUS_ACTIVE',
      shell: '/bin/sh',
      closedAt: null,
    });

    const first = await call('POST', `/v1/sessions/${ses}/exec`, { command: 'cd src && export B=2' });
    check('SessionExec', first);
    expect(first.json).toMatchObject({ exitCode: 0, timedOut: false });
    const second = await call('POST', `/v1/sessions/${ses}/exec`, { command: 'pwd; echo $A$B' });
    expect(second.json.stdout).toBe('/workspace/src\n12\n');
    const slow = await call('POST', `/v1/sessions/${ses}/exec`, { command: 'sleep 30', timeout: '0.5s' });
    expectError(slow, 504, 'AF_TIMEOUT', /timed out/);
    expect(slow.json.details[0].metadata).toMatchObject({ timedOut: 'true', sessionClosed: 'false' });
    expect((await call('POST', `/v1/sessions/${ses}/exec`, { command: 'echo still here' })).json.stdout).toBe(
      'still here\n',
    );

    const list = await call('GET', `/v1/sandboxes/${ids.sb}/sessions`);
    check('ListSessions', list);
    expect((list.json.sessions as { id: string }[]).map((s) => s.id)).toEqual([ses]);
    const got = await call('GET', `/v1/sessions/${ses}`);
    check('GetSession', got);
    expect(got.json.id).toBe(ses);

    expect((await call('POST', `/v1/sandboxes/${ids.sb}/sessions`, { shell: '/bin/zsh' })).status).toBe(400);
    const deleted = await call('DELETE', `/v1/sessions/${ses}`);
    check('DestroySession', deleted);
    expect(deleted.json).toEqual({});
    expect((await call('GET', `/v1/sessions/${ses}`)).status).toBe(404);
    expect((await call('POST', `/v1/sessions/${ses}/exec`, { command: 'true' })).status).toBe(404);

    // Stopping the sandbox closes its sessions.
    const other = (await call('POST', `/v1/sandboxes/${ids.sb}/sessions`)).json.id as string;
    await call('POST', `/v1/sandboxes/${ids.sb}/stop`);
    expect((await call('GET', `/v1/sessions/${other}`)).status).toBe(404);
    await destroy(ids);
  });
});

describe('shutdown', () => {
  it('SIGTERM stops running sandboxes, unmounts everything and exits 0', async () => {
    const own = await startServer();
    const ownCall = client(own.url, own.token);
    const cb = (await ownCall('POST', '/v1/codebases', { name: 'x' })).json.id as string;
    await ownCall('PUT', `/v1/codebases/${cb}/files/a.txt`, 'a');
    const sandboxes: string[] = [];
    for (let i = 0; i < 2; i += 1) {
      const answer = await ownCall('POST', '/v1/sandboxes', { codebase_id: cb, start: true });
      expect(answer.json.status).toBe('SANDBOX_STATUS_RUNNING');
      sandboxes.push(answer.json.id as string);
    }
    await ownCall('POST', `/v1/sandboxes/${sandboxes[0]}/sessions`);
    expect((await mountsUnder(own.dataDir)).length).toBeGreaterThan(0);
    // Two workers, two launchers and the session's bwrap at least (an idle pool worker only sometimes:
    // the pool refills in the background, and a worker serving a sandbox renames its command line).
    const tree = await descendantsOf(own.child.pid as number);
    expect(tree.length).toBeGreaterThanOrEqual(3);
    // A command in flight is cancelled rather than holding the shutdown.
    const inFlight = ownCall('POST', `/v1/sandboxes/${sandboxes[1]}/exec`, { command: 'sleep 300' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const began = Date.now();
    const output = await stopAndCheck(own, 'SIGINT'); // exit 0, no mount, no process
    expect(Date.now() - began).toBeLessThan(20_000);
    expect(output).toContain('SIGINT: stopping sandboxes and unmounting');
    expect(output).toContain('agentfense: stopped');
    expect(await stillAlive(tree)).toEqual([]);
    const answer = await inFlight.catch(() => undefined);
    if (answer !== undefined) expect(answer.json).toMatchObject({ cancelled: true });
  });
});
