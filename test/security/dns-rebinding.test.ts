// `serve --insecure-no-auth` is protected only by listening on loopback. A web page on
// evil.example whose DNS name is re-pointed at 127.0.0.1 (DNS rebinding) makes the victim's browser send
// requests to our socket with `Host: evil.example` and `Origin: http://evil.example`; answering them
// would let the page list codebases and download files. Such requests must be refused (403) before any
// route runs; loopback names keep working. The same for gRPC's `:authority`. Real `agentfense serve`, raw
// HTTP requests and a gRPC client on loopback.
import { request as httpRequest } from 'node:http';
import { describe, expect, it, onTestFinished } from 'vitest';
import { codeOf, grpcClient, status } from '../helpers/grpc-client.js';
import { startGrpcServer } from '../helpers/grpc-serve.js';
import { expectError, startServer, tokenFile, scratch } from '../helpers/http-fixture.js';

/** A request with the Host/Origin headers a rebinding browser would send (fetch would not let us). */
function send(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; json: unknown; text: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, method, path, headers, setHost: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, json, text });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('DNS rebinding against serve --insecure-no-auth', () => {
  it('gRPC: refuses a foreign :authority with PERMISSION_DENIED before the call runs', async () => {
    const server = await startGrpcServer(['--insecure-no-auth']);
    const port = server.target.split(':').at(-1) as string;
    const evil = grpcClient(server.target, undefined, `evil.example:${port}`);
    onTestFinished(() => evil.close());
    const refused = evil.unary('codebase', 'CreateCodebase', { name: 'planted', owner_id: 'u' });
    expect(await codeOf(refused)).toBe(status.PERMISSION_DENIED);
    expect(await codeOf(evil.unary('codebase', 'ListCodebases', {}))).toBe(status.PERMISSION_DENIED);
    expect(await codeOf(evil.stream('sandbox', 'ExecStream', { sandbox_id: 'sb_x', command: 'true' }))).toBe(
      status.PERMISSION_DENIED,
    );
    // Nothing was created; loopback names (what the original's SDK sends: localhost:9000) are answered.
    for (const authority of [`localhost:${port}`, `127.0.0.1:${port}`]) {
      const local = grpcClient(server.target, undefined, authority);
      onTestFinished(() => local.close());
      const listed = (await local.unary('codebase', 'ListCodebases', {})) as { codebases: unknown[] };
      expect(listed.codebases, authority).toEqual([]);
    }
  });

  it('refuses foreign Host and Origin values with 403, answers loopback ones', async () => {
    const served = await startServer(['--insecure-no-auth']);
    const port = new URL(served.url).port;
    // Something to steal: a codebase with a file.
    const created = await send(
      served.url,
      'POST',
      '/v1/codebases',
      { host: `127.0.0.1:${port}` },
      '{"name":"secret"}',
    );
    expect(created.status, created.text).toBe(200);
    const id = (created.json as { id: string }).id;
    expect(
      (
        await send(
          served.url,
          'PUT',
          `/v1/codebases/${id}/files/key.txt`,
          { host: `localhost:${port}` },
          'TOKEN',
        )
      ).status,
    ).toBe(200);

    for (const host of [
      `evil.example:${port}`,
      'evil.example',
      `127.0.0.1.evil.example:${port}`,
      `10.0.0.1:${port}`,
      '',
    ]) {
      for (const path of ['/v1/codebases', `/v1/codebases/${id}/files/key.txt`, '/v1/health']) {
        const answer = await send(served.url, 'GET', path, { host });
        expectError(answer, 403, 'AF_PERMISSION_DENIED', /Host .* not a loopback name/);
        expect(answer.text).not.toContain('TOKEN');
        expect(answer.text).not.toContain(id);
      }
    }
    // A write from a rebinding page changes nothing.
    const write = await send(
      served.url,
      'POST',
      '/v1/codebases',
      { host: `evil.example:${port}` },
      '{"name":"x"}',
    );
    expect(write.status).toBe(403);
    // A loopback Host with a foreign Origin: a page of another site (rebinding or plain CSRF).
    for (const origin of [
      'http://evil.example',
      `http://evil.example:${port}`,
      'null',
      'http://127.0.0.1.evil.example',
    ]) {
      const answer = await send(served.url, 'GET', '/v1/codebases', { host: `127.0.0.1:${port}`, origin });
      expectError(answer, 403, 'AF_PERMISSION_DENIED', /Origin .* not a loopback origin/);
    }
    const cross = await send(
      served.url,
      'POST',
      '/v1/codebases',
      { host: `127.0.0.1:${port}`, origin: 'http://evil.example' },
      '{"name":"y"}',
    );
    expect(cross.status).toBe(403);

    // Loopback names, with and without an Origin of a local page, still work; nothing else was created.
    for (const headers of <Record<string, string>[]>[
      { host: `127.0.0.1:${port}` },
      { host: `localhost:${port}` },
      { host: `LOCALHOST:${port}` },
      { host: `[::1]:${port}` },
      { host: `127.0.0.1:${port}`, origin: `http://localhost:${port}` },
      { host: `127.0.0.1:${port}`, origin: 'http://[::1]:3000' },
    ]) {
      const answer = await send(served.url, 'GET', '/v1/codebases', headers);
      expect(answer.status, `${JSON.stringify(headers)}: ${answer.text}`).toBe(200);
      expect((answer.json as { codebases: { name: string }[] }).codebases.map((c) => c.name)).toEqual([
        'secret',
      ]);
    }
  });

  it('leaves a server with a token to its token: any Host is accepted with it, none without', async () => {
    const { file, token } = await tokenFile(await scratch());
    const served = await startServer(['--token-file', file]);
    const port = new URL(served.url).port;
    const authorized = await send(served.url, 'GET', '/v1/codebases', {
      host: `agentfense.internal:${port}`,
      authorization: `Bearer ${token}`,
    });
    expect(authorized.status, authorized.text).toBe(200);
    const anonymous = await send(served.url, 'GET', '/v1/codebases', { host: `evil.example:${port}` });
    expect(anonymous.status).toBe(401);
  });
});
