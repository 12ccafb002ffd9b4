// The run helper's spare sandbox (packages/control/src/cli/run-helper/spare.ts) through `agentfense serve`:
// an idle spare is internal, started ahead for the next identical `run` of the same data directory. A
// remote caller must not see it (it could exec in it, stop or destroy it before a run takes it) nor make
// one: the reserved label `agentfense.spare` is refused on create over HTTP and gRPC with the same error the
// CLI gives, a listing filter on it is refused over HTTP, and neither face lists a spare or its codebase.
// A real helper makes the spare, next to a real server on the same data directory.
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment --
   gRPC messages are loaded from the .proto at run time (as the SDK's are), so they are untyped here. */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitForReapers } from '../helpers/reapers.js';
import { startHelper, stopHelper, until } from '../helpers/run-helper.js';
import { bin, client, expectError, launchServer, stopAndCheck } from '../helpers/http-fixture.js';
import type { Served } from '../helpers/http-fixture.js';
import { grpcClient, status } from '../helpers/grpc-client.js';
import type { GrpcClient } from '../helpers/grpc-client.js';

/** The helper on, with spares (the default for users); it idles out soon if the file fails early. */
const HELPER = { AGENTFENSE_RUN_HELPER: '1', AGENTFENSE_RUN_HELPER_IDLE: '60' };
/** What the CLI, the library and both API faces say to a caller that sets the reserved key. */
const RESERVED =
  /label key agentfense\.spare is reserved for the run helper's spare sandboxes; use another key/;

interface Listed {
  readonly id: string;
  readonly codebaseId: string;
  readonly labels: Record<string, string>;
}

let scratch: string;
let data: string;
let served: Served | undefined;
let grpc: GrpcClient | undefined;
let spare: Listed;

/** `agentfense sandbox list --json` of the data directory, with `flags`. */
async function cliList(flags: string[] = []): Promise<Listed[]> {
  const r = await execa(process.execPath, [bin, 'sandbox', 'list', '--data', data, '--json', ...flags]);
  return JSON.parse(r.stdout) as Listed[];
}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-http-spare-'));
  const repo = join(scratch, 'repo');
  data = join(scratch, 'data');
  await mkdir(repo);
  await writeFile(join(repo, 'README.md'), 'hi\n');
  const run = [bin, 'run', repo, '--data', data, '--label', 'team=blue', '--', 'true'];
  // The first run works in-process and leaves the helper; the second goes through it, which then starts a
  // spare with that run's options for the next one.
  await startHelper(run, data, HELPER);
  const second = await execa(process.execPath, run, { env: HELPER, reject: false });
  expect(second.exitCode, second.stderr).toBe(0);
  // The CLI's own door to idle spares: a filter on the reserved key (records.ts).
  await until('the spare', async () => (await cliList(['--label', 'agentfense.spare=true'])).length === 1);
  [spare] = (await cliList(['--label', 'agentfense.spare=true'])) as [Listed];
  expect(spare.labels).toMatchObject({ team: 'blue', 'agentfense.spare': 'true' });
  served = await launchServer(['--grpc-listen', '127.0.0.1:0'], data);
  const target = /grpc:\/\/(\S+) /.exec(served.output())?.[1];
  if (target === undefined) throw new Error(`no gRPC address in: ${served.output()}`);
  grpc = grpcClient(target, served.token);
});

afterAll(async () => {
  grpc?.close();
  // The helper first: it owns the spare (its worker and mount are under the data directory, which the
  // server's leak check looks at).
  await stopHelper(data);
  expect(await waitForReapers(data)).toBe(true);
  if (served !== undefined) await stopAndCheck(served);
  await rm(scratch, { recursive: true, force: true });
});

describe("the run helper's spare sandbox over HTTP and gRPC", () => {
  it('is in no listing of either face, nor is its codebase', async () => {
    const call = client((served as Served).url, (served as Served).token);
    const c = grpc as GrpcClient;
    // Control: the server sees the data directory, and a sandbox with the spare's other label is listed.
    const cb = (await call('POST', '/v1/codebases', { name: 'visible' })).json.id as string;
    const made = await call('POST', '/v1/sandboxes', { codebase_id: cb, labels: { team: 'blue' } });
    expect(made.status, made.text).toBe(200);
    const visible = made.json.id as string;

    const httpIds = async (query = ''): Promise<string[]> => {
      const answer = await call('GET', `/v1/sandboxes${query}`);
      expect(answer.status, answer.text).toBe(200);
      return (answer.json.sandboxes as { id: string }[]).map((s) => s.id);
    };
    expect(await httpIds()).toEqual([visible]);
    expect(await httpIds('?labels=team:blue')).toEqual([visible]);
    expect(await httpIds('?status=running')).toEqual([]);
    expect(await httpIds(`?codebase_id=${spare.codebaseId}`)).toEqual([]);
    const httpCodebases = (await call('GET', '/v1/codebases')).json.codebases as { id: string }[];
    expect(httpCodebases.map((x) => x.id)).toEqual([cb]);

    const grpcSandboxes = (await c.unary('sandbox', 'ListSandboxes', {})).sandboxes as { id: string }[];
    expect(grpcSandboxes.map((s) => s.id)).toEqual([visible]);
    const byCodebase = await c.unary('sandbox', 'ListSandboxes', { codebase_id: spare.codebaseId });
    expect(byCodebase.sandboxes).toEqual([]);
    const grpcCodebases = (await c.unary('codebase', 'ListCodebases', {})).codebases as { id: string }[];
    expect(grpcCodebases.map((x) => x.id)).toEqual([cb]);

    // The CLI's filter on the reserved key is refused over HTTP (gRPC has no label filter).
    expectError(
      await call('GET', '/v1/sandboxes?labels=agentfense.spare:true'),
      400,
      'AF_INVALID_ARGUMENT',
      RESERVED,
    );
    expect((await call('DELETE', `/v1/sandboxes/${visible}`)).status).toBe(200);
    // Still there, still idle, for the next run.
    expect((await cliList(['--label', 'agentfense.spare=true'])).map((s) => s.id)).toEqual([spare.id]);
  });

  it('cannot be made: the reserved label is refused on create over HTTP and gRPC, and nothing is created', async () => {
    const call = client((served as Served).url, (served as Served).token);
    const c = grpc as GrpcClient;
    const cb = (await call('POST', '/v1/codebases', { name: 'p' })).json.id as string;
    for (const value of ['true', 'x']) {
      expectError(
        await call('POST', '/v1/sandboxes', { codebase_id: cb, labels: { 'agentfense.spare': value } }),
        400,
        'AF_INVALID_ARGUMENT',
        RESERVED,
      );
      const refused = await c
        .unary('sandbox', 'CreateSandbox', {
          codebase_id: cb,
          permissions: [{ pattern: '**', permission: 'PERMISSION_READ' }],
          labels: { team: 'blue', 'agentfense.spare': value },
        })
        .then(
          () => undefined,
          (err: { code: number; details: string }) => err,
        );
      expect(refused?.code).toBe(status.INVALID_ARGUMENT);
      expect(refused?.details).toMatch(RESERVED);
    }
    // Nothing was created, under any filter (the CLI's reserved one included: only the spare).
    expect((await call('GET', `/v1/sandboxes?codebase_id=${cb}`)).json.sandboxes).toEqual([]);
    expect((await c.unary('sandbox', 'ListSandboxes', { codebase_id: cb })).sandboxes).toEqual([]);
    expect((await cliList(['--label', 'agentfense.spare=true'])).map((s) => s.id)).toEqual([spare.id]);
    expect((await call('DELETE', `/v1/codebases/${cb}`)).status).toBe(200);
  });
});
