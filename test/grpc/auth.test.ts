// The gRPC face is behind the same bearer token as HTTP (metadata `authorization`; the data directory's
// by default), refuses a non-loopback address with --insecure-no-auth before opening anything, and stops with serve (SIGTERM ends running
// calls, exits 0, leaves no mount or process).
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment --
   gRPC messages are loaded from the .proto at run time (as the SDK's are), so they are untyped here. */
import { stat } from 'node:fs/promises';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { bin, client as httpClient, scratch, tokenFile } from '../helpers/http-fixture.js';
import { codeOf, grpcClient, status } from '../helpers/grpc-client.js';
import { startGrpcServer } from '../helpers/grpc-serve.js';

describe('gRPC sandbox.v1: authentication and lifecycle', () => {
  it('enforces the token on gRPC and HTTP alike', async () => {
    const { file, token } = await tokenFile(await scratch());
    const server = await startGrpcServer(['--token-file', file]);
    expect(await codeOf(server.client(null).unary('codebase', 'ListCodebases', {}))).toBe(
      status.UNAUTHENTICATED,
    );
    expect(await codeOf(server.client('x'.repeat(40)).unary('codebase', 'ListCodebases', {}))).toBe(
      status.UNAUTHENTICATED,
    );
    expect(await codeOf(server.client(null).unary('codebase', 'CreateCodebase', { name: 'n' }))).toBe(
      status.UNAUTHENTICATED,
    );
    expect(
      await codeOf(server.client(null).stream('sandbox', 'ExecStream', { sandbox_id: '', command: 'x' })),
    ).toBe(status.UNAUTHENTICATED);
    expect(await codeOf(server.client(null).upload([]))).toBe(status.UNAUTHENTICATED);
    const authed = server.client(token);
    // Nothing was created by the refused calls; the right token works on both faces, for one backend.
    expect((await authed.unary('codebase', 'ListCodebases', {})).codebases).toEqual([]);
    const created = await authed.unary('codebase', 'CreateCodebase', { name: 'shared', owner_id: 'u' });
    const http = await httpClient(server.served.url, token)('GET', `/v1/codebases/${created.id}`);
    expect(http.status).toBe(200);
    expect(http.json.name).toBe('shared');
  });

  it.each(['0.0.0.0:0', '[::]:0'])(
    'refuses --grpc-listen %s with --insecure-no-auth, before opening anything',
    async (listen) => {
      const dir = await scratch();
      const result = await execa(
        process.execPath,
        [
          bin,
          'serve',
          '--insecure-no-auth',
          '--listen',
          '127.0.0.1:0',
          '--grpc-listen',
          listen,
          '--data',
          `${dir}/data`,
        ],
        { reject: false },
      );
      expect(result.exitCode).toBe(2);
      expect(result.stderr).toMatch(/refusing to listen on .* without authentication/);
      await expect(stat(`${dir}/data`)).rejects.toMatchObject({ code: 'ENOENT' });
    },
  );

  it('refuses a malformed --grpc-listen and both faces disabled', async () => {
    const dir = await scratch();
    const cases: [string[], RegExp][] = [
      [['--grpc-listen', 'localhost'], /invalid --grpc-listen/],
      [['--listen', '', '--grpc-listen', ''], /nothing to serve/],
    ];
    for (const [args, message] of cases) {
      const result = await execa(process.execPath, [bin, 'serve', '--data', `${dir}/data`, ...args], {
        reject: false,
      });
      expect(result.exitCode, args.join(' ')).toBe(2);
      expect(result.stderr).toMatch(message);
    }
  });

  it("uses the data directory's token by default (the CLI's session commands read it from there)", async () => {
    const server = await startGrpcServer();
    expect(await codeOf(server.client(null).unary('codebase', 'ListCodebases', {}))).toBe(
      status.UNAUTHENTICATED,
    );
    expect((await server.client().unary('codebase', 'ListCodebases', {})).codebases).toEqual([]);
  });

  it('SIGTERM ends a running Exec and stops cleanly', async () => {
    const server = await startGrpcServer();
    const c = server.client();
    const codebase = await c.unary('codebase', 'CreateCodebase', { name: 'p', owner_id: 'u' });
    const sandbox = await c.unary('sandbox', 'CreateSandbox', {
      codebase_id: codebase.id,
      permissions: [{ pattern: '**', permission: 'PERMISSION_READ' }],
    });
    await c.unary('sandbox', 'StartSandbox', { sandbox_id: sandbox.id });
    const running = codeOf(c.unary('sandbox', 'Exec', { sandbox_id: sandbox.id, command: 'sleep 300' }));
    // Whether the stop lands before or after the command started, the call must end, not hang.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const { exitCode, output } = await server.served.stop();
    expect(exitCode, output).toBe(0);
    expect([status.CANCELLED, status.UNAVAILABLE]).toContain(await running);
    // A fresh client cannot reach it any more.
    const late = grpcClient(server.target);
    try {
      expect(await codeOf(late.unary('codebase', 'ListCodebases', {}))).toBe(status.UNAVAILABLE);
    } finally {
      late.close();
    }
  });
});
