// Bearer-token authentication and the loopback rule of `agentfense serve`, over real HTTP: every route but
// health and the OpenAPI document needs the token (--token-file's, else the data directory's, made on
// first start); only --insecure-no-auth serves without one, and then on loopback only; bad flags are
// refused before anything is opened.
/* eslint-disable @typescript-eslint/no-unsafe-member-access --
   Answers are parsed JSON (`any`); the document's own tests check their shapes. */
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { isLoopback, parseListen } from '@agentfense/control';
import {
  bin,
  client,
  expectError,
  launchServer,
  scratch,
  startServer,
  stopAndCheck,
  tokenFile,
} from '../helpers/http-fixture.js';

describe('with --token-file', () => {
  it('requires the bearer token on every route but health and the OpenAPI document', async () => {
    const dir = await scratch();
    const { file, token } = await tokenFile(dir);
    const served = await startServer(['--token-file', file]);
    expect(served.output()).toContain('bearer token required');
    const anonymous = client(served.url);
    const wrong = client(served.url, token.slice(0, -1) + 'x');
    const right = client(served.url, token);

    expect((await anonymous('GET', '/v1/health')).status).toBe(200);
    const doc = await anonymous('GET', '/v1/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.json.security).toEqual([{ bearer: [] }]);

    for (const call of [anonymous, wrong]) {
      const answer = await call('GET', '/v1/codebases');
      expect(answer.status).toBe(401);
      expect(answer.headers.get('www-authenticate')).toMatch(/^Bearer/);
      // UNAUTHENTICATED (16), which grpc-gateway answers with 401.
      expectError(answer, 401, 'AF_PERMISSION_DENIED', /^missing or invalid bearer token$/, 16);
    }
    // Unknown routes and uploads are refused before routing or reading the body.
    expect((await anonymous('GET', '/v1/no-such-route')).status).toBe(401);
    expect((await anonymous('PUT', '/v1/codebases/cb_x/files/a.txt', 'data')).status).toBe(401);
    expect((await anonymous('GET', '/v1/codebases', undefined, { authorization: token })).status).toBe(401);
    expect(
      (await anonymous('GET', '/v1/codebases', undefined, { authorization: `Basic ${token}` })).status,
    ).toBe(401);
    expect((await anonymous('GET', '/v1/codebases', undefined, { authorization: 'Bearer ' })).status).toBe(
      401,
    );

    expect((await right('GET', '/v1/codebases')).status).toBe(200);
    expect(
      (await right('GET', '/v1/codebases', undefined, { authorization: `bearer ${token}` })).status,
    ).toBe(200);
    const created = await right('POST', '/v1/codebases', { name: 'x' });
    expect(created.status).toBe(200);
    expect((await right('DELETE', `/v1/codebases/${created.json.id as string}`)).status).toBe(200);
  });

  it('may listen beyond loopback', async () => {
    const { file, token } = await tokenFile(await scratch());
    const served = await startServer(['--token-file', file, '--listen', '0.0.0.0:0']);
    expect(served.url).toMatch(/^http:\/\/0\.0\.0\.0:\d+$/);
    const port = new URL(served.url).port;
    expect((await client(`http://127.0.0.1:${port}`, token)('GET', '/v1/codebases')).status).toBe(200);
    expect((await client(`http://127.0.0.1:${port}`)('GET', '/v1/codebases')).status).toBe(401);
  });
});

describe("without --token-file: the data directory's token", () => {
  it('makes a 0600 token on first start, never prints it, requires it, and keeps it across restarts', async () => {
    const served = await startServer();
    const file = join(served.dataDir, 'api-token');
    const st = await stat(file);
    expect(st.mode & 0o777).toBe(0o600);
    expect(served.token).toMatch(/^[0-9a-f]{64}$/);
    expect(served.output()).toContain(`bearer token required, the one in ${file}`);
    expect(served.output()).not.toContain(served.token);
    expect((await client(served.url)('GET', '/v1/codebases')).status).toBe(401);
    expect((await client(served.url, served.token)('GET', '/v1/codebases')).status).toBe(200);
    expect((await client(served.url)('GET', '/v1/openapi.json')).json.security).toEqual([{ bearer: [] }]);
    // Its log has no token either.
    const logs = await readFile(join(served.dataDir, 'logs', 'control.log'), 'utf8').catch(() => '');
    expect(logs).not.toContain(served.token);
    await served.stop();
    const again = await launchServer([], served.dataDir);
    try {
      expect(again.token).toBe(served.token);
    } finally {
      await stopAndCheck(again);
    }
  });

  it('refuses a token file others may read, naming the file and the fix', async () => {
    const dir = await scratch();
    await mkdir(`${dir}/data`, { mode: 0o700 });
    await writeFile(`${dir}/data/api-token`, `${'f'.repeat(64)}\n`, { mode: 0o644 });
    const result = await execa(
      process.execPath,
      [bin, 'serve', '--listen', '127.0.0.1:0', '--grpc-listen', '', '--data', `${dir}/data`],
      { reject: false },
    );
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(/api-token must be a regular file .*\(mode 0600; it is 644/);
  });
});

describe('--insecure-no-auth', () => {
  it('serves loopback with no authentication, warns, and says so in the OpenAPI document', async () => {
    const served = await startServer(['--insecure-no-auth']);
    expect(served.output()).toContain('NO AUTHENTICATION');
    expect(served.output()).toMatch(/WARNING: --insecure-no-auth: .*every local user/);
    const call = client(served.url);
    expect((await call('GET', '/v1/codebases')).status).toBe(200);
    expect((await call('GET', '/v1/openapi.json')).json.security).toBeUndefined();
    await expect(stat(join(served.dataDir, 'api-token'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it.each(['0.0.0.0:0', '[::]:0', '192.0.2.1:9000', 'example.com:9000'])(
    'refuses to listen on %s with status 2 before opening anything',
    async (listen) => {
      const dir = await scratch();
      const result = await execa(
        process.execPath,
        [bin, 'serve', '--insecure-no-auth', '--listen', listen, '--data', `${dir}/data`],
        { reject: false },
      );
      expect(result.exitCode).toBe(2);
      expect(result.stderr).toMatch(/refusing to listen on .* without authentication/);
      expect(result.stderr).toContain('drop --insecure-no-auth');
      await expect(stat(`${dir}/data`)).rejects.toMatchObject({ code: 'ENOENT' });
    },
  );

  it('refuses --insecure-no-auth with --token-file', async () => {
    const dir = await scratch();
    const { file } = await tokenFile(dir);
    const result = await execa(
      process.execPath,
      [bin, 'serve', '--insecure-no-auth', '--token-file', file, '--data', `${dir}/data`],
      { reject: false },
    );
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toContain('--insecure-no-auth and --token-file contradict each other');
  });
});

describe('bad flags', () => {
  it('refuses a short or missing token file and a malformed --listen with status 2', async () => {
    const dir = await scratch();
    const short = await tokenFile(dir, 'secret');
    const cases: [string[], RegExp][] = [
      [['--token-file', short.file], /at least 32 characters/],
      [['--token-file', `${dir}/absent`], /cannot read the token file/],
      [['--listen', 'localhost'], /invalid --listen/],
      [['--listen', '127.0.0.1:99999'], /invalid --listen/],
      [['--listen', '[nope]:80'], /invalid --listen/],
    ];
    for (const [args, message] of cases) {
      const result = await execa(process.execPath, [bin, 'serve', '--data', `${dir}/data`, ...args], {
        reject: false,
      });
      expect(result.exitCode, args.join(' ')).toBe(2);
      expect(result.stderr).toMatch(message);
    }
  });

  it('fails with status 1 when the port is taken', async () => {
    const served = await startServer();
    const port = new URL(served.url).port;
    const dir = await scratch();
    const result = await execa(
      process.execPath,
      [bin, 'serve', '--listen', `127.0.0.1:${port}`, '--data', `${dir}/data`],
      { reject: false },
    );
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toMatch(/cannot listen on 127\.0\.0\.1:\d+: .*EADDRINUSE/);
  });

  it('parses listen addresses and knows loopback', () => {
    expect(parseListen('9000')).toEqual({ host: '127.0.0.1', port: 9000 });
    expect(parseListen(':0')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parseListen('[::1]:80')).toEqual({ host: '::1', port: 80 });
    expect(parseListen('localhost:1')).toEqual({ host: 'localhost', port: 1 });
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1', 'localhost']) {
      expect(isLoopback(host), host).toBe(true);
    }
    for (const host of ['0.0.0.0', '::', '10.0.0.1', '128.0.0.1', 'example.com', '::ffff:10.0.0.1']) {
      expect(isLoopback(host), host).toBe(false);
    }
  });
});
