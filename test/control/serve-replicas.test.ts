// Two `agentfense serve` replicas over one data directory and one PostgreSQL database (a private cluster):
// a sandbox created through one is started, used and diffed through the other; a replica killed with
// SIGKILL in the middle of an exec leaves its sandbox to the other, which recovers it (STOPPED, its
// delta kept) within one reap interval and starts it again; every record is still listed afterwards.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { client, launchServer, scratch, stopAndCheck } from '../helpers/http-fixture.js';
import type { Answer, Served } from '../helpers/http-fixture.js';
import { startPostgres } from '../helpers/postgres.js';
import type { PostgresCluster } from '../helpers/postgres.js';

let cluster: PostgresCluster | undefined;
beforeAll(async () => {
  cluster = await startPostgres();
});
afterAll(async () => {
  await cluster?.stop();
});

/** A field of a JSON answer (protojson leaves zero values out: an absent exitCode is 0). */
function field(answer: Answer, key: string): unknown {
  return (answer.json as Record<string, unknown> | undefined)?.[key];
}

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 25_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Read everywhere, write under /src (what the test edits and diffs). */
const permissions = [
  { pattern: '**', permission: 'PERMISSION_READ', priority: 0 },
  { pattern: '/src/', permission: 'PERMISSION_WRITE', priority: 10 },
];

describe('serve replicas sharing PostgreSQL', () => {
  it('a sandbox made through one is used through the other; a replica killed mid-exec loses nothing', async () => {
    const url = cluster?.url ?? '';
    const password = cluster?.password ?? '';
    const dataDir = join(await scratch('af-replicas-'), 'data');
    // The URL through the environment: argv (readable by every local user in /proc) never holds it.
    const env = { ...process.env, AGENTFENSE_DATABASE: url } as Record<string, string>;
    let a: Served | undefined = await launchServer([], dataDir, { env });
    let b: Served | undefined;
    try {
      b = await launchServer([], dataDir, { env });
      expect(b.token).toBe(a.token); // one data directory, one token
      const viaA = client(a.url, a.token);
      const viaB = client(b.url, b.token);

      // Made through A, not started.
      const cb = field(await viaA('POST', '/v1/codebases', { name: 'shared' }), 'id') as string;
      expect((await viaA('PUT', `/v1/codebases/${cb}/files/src/a.txt`, 'from A\n')).status).toBe(200);
      const made = await viaA('POST', '/v1/sandboxes', {
        codebase_id: cb,
        permissions,
      });
      expect(made.status, made.text).toBe(200);
      const first = field(made, 'id') as string;

      // Started and used through B: files, exec, diff.
      expect((await viaB('PUT', `/v1/codebases/${cb}/files/src/b.txt`, 'from B\n')).status).toBe(200);
      expect((await viaB('POST', `/v1/sandboxes/${first}/start`)).status).toBe(200);
      const cat = await viaB('POST', `/v1/sandboxes/${first}/exec`, {
        command: 'cat /workspace/src/a.txt /workspace/src/b.txt && echo changed >> /workspace/src/a.txt',
      });
      expect(cat.status, cat.text).toBe(200);
      expect(field(cat, 'stdout')).toBe('from A\nfrom B\n');
      expect(field(cat, 'exitCode') ?? 0).toBe(0);
      const diff = await viaB('GET', `/v1/sandboxes/${first}/diff`);
      expect(diff.status).toBe(200);
      expect(field(diff, 'diff')).toContain('+changed');
      // A does not run it: it says which process does.
      const elsewhere = await viaA('POST', `/v1/sandboxes/${first}/exec`, { command: 'true' });
      expect(elsewhere.status).toBe(400); // AF_WRONG_STATE
      expect(elsewhere.text).toContain(`control-plane process ${b.child.pid}`);

      // A second sandbox, started through A, and A killed while a command of it runs.
      const second = field(
        await viaA('POST', '/v1/sandboxes', { codebase_id: cb, permissions, start: true }),
        'id',
      ) as string;
      const running = viaA('POST', `/v1/sandboxes/${second}/exec`, {
        command: 'echo kept > /workspace/src/d.txt; sleep 30',
      }).catch((err: unknown) => err);
      await until('the command to be under way', async () => {
        const seen = await viaB('GET', `/v1/sandboxes/${second}`);
        return /running/i.test(String(field(seen, 'status'))) ? true : undefined;
      });
      await new Promise((resolve) => setTimeout(resolve, 500));
      const aPid = a.child.pid;
      a.child.kill('SIGKILL');
      await a.child;
      a = undefined;
      expect(await running).toBeInstanceOf(Error); // the connection died with A

      // B recovers what A ran within a reap interval (10 s), then starts it again: the delta was kept.
      const recovered = await until('the recovery by B', async () => {
        const seen = await viaB('GET', `/v1/sandboxes/${second}`);
        return /stopped/i.test(String(field(seen, 'status'))) ? seen : undefined;
      });
      expect(recovered.text).toContain(`control-plane process ${aPid} exited`);
      expect((await viaB('POST', `/v1/sandboxes/${second}/start`)).status).toBe(200);
      const after = await viaB('POST', `/v1/sandboxes/${second}/exec`, {
        command: 'cat /workspace/src/d.txt',
      });
      expect(field(after, 'stdout')).toBe('kept\n');

      // No record lost: both sandboxes, the codebase and its two files.
      const listed = await viaB('GET', '/v1/sandboxes');
      expect((field(listed, 'sandboxes') as { id: string }[]).map((s) => s.id).sort()).toEqual(
        [first, second].sort(),
      );
      const codebases = await viaB('GET', '/v1/codebases');
      expect((field(codebases, 'codebases') as { id: string }[]).map((c) => c.id)).toEqual([cb]);
      const files = await viaB('GET', `/v1/codebases/${cb}/files?path=src`);
      expect(files.text).toContain('a.txt');
      expect(files.text).toContain('b.txt');

      for (const id of [first, second])
        expect((await viaB('DELETE', `/v1/sandboxes/${id}`)).status).toBe(200);
      const output = await stopAndCheck(b);
      b = undefined;
      expect(output).not.toContain(password);
      expect(output).toContain('records in postgresql://af:***@');
    } finally {
      a?.child.kill('SIGKILL');
      await a?.child;
      await b?.stop(); // SIGTERM: its sandboxes stopped and unmounted before the scratch goes
      // A failure before B recovered A's sandboxes would leave them mounted: a control plane opened over
      // the same records recovers a dead owner's sandboxes (unmounting them) before the scratch goes.
      const sweep = await ControlPlane.open({ dataDir, database: url });
      await sweep.close();
    }
  });
});
