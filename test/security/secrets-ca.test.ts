// Attack: the sandbox CA's key leaks (docs/secrets.md, "The per-sandbox CA"). Whoever holds it signs a
// leaf for a name no secret is bound to (evil.test) or for an address, and serves it to the sandbox's
// clients. The CA's name constraints make every verifier that reads them refuse such a leaf, while a
// leaf for the bound host still verifies. The CA and the bundle are the ones a start makes
// (secret-start.ts); the leaves are signed with openssl, as an attacker holding the key would.
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withPlaceholders } from '@agentfense/network';
import { secretStart } from '../../packages/control/src/sandboxes/secret-start.js';

const dir = mkdtempSync(join(tmpdir(), 'af-secrets-ca-'));
const file = (name: string): string => join(dir, name);

/** A leaf for `altName` (`DNS:…` or `IP:…`) signed with the sandbox CA's key; its PEM path. */
function signLeaf(name: string, altName: string): string {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const openssl = (args: string[]): void => void execFileSync('openssl', args, { stdio: 'ignore' });
  openssl([
    'req',
    ...ec,
    '-keyout',
    file(`${name}.key`),
    '-out',
    file(`${name}.csr`),
    '-subj',
    `/CN=${name}`,
  ]);
  writeFileSync(file(`${name}.ext`), `subjectAltName=${altName}\nextendedKeyUsage=serverAuth\n`);
  openssl([
    ...['x509', '-req', '-in', file(`${name}.csr`), '-CA', file('ca.pem'), '-CAkey', file('ca.key')],
    ...['-set_serial', '7', '-out', file(`${name}.pem`), '-days', '2', '-extfile', file(`${name}.ext`)],
  ]);
  return file(`${name}.pem`);
}

/** `openssl verify` of `leaf` against the sandbox's bundle: its output, and whether it passed. */
function verify(leaf: string): { ok: boolean; out: string } {
  try {
    const out = execFileSync('openssl', ['verify', '-CAfile', file('bundle.pem'), leaf], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return { ok: true, out };
  } catch (err) {
    const e = err as { stdout: string; stderr: string };
    return { ok: false, out: `${e.stdout}${e.stderr}` };
  }
}

describe('a leaked sandbox CA key', () => {
  const servers: Server[] = [];
  const serve = async (name: string): Promise<number> => {
    const key = readFileSync(file(`${name}.key`));
    const cert = readFileSync(file(`${name}.pem`));
    const server = createServer({ key, cert }, (_req, res) => res.end(`hello from ${name}\n`));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    servers.push(server);
    return (server.address() as AddressInfo).port;
  };

  beforeAll(() => {
    const secrets = withPlaceholders([{ name: 'API_KEY', hosts: ['pub.test'], value: 'sk-unused' }]);
    const placeholders = { API_KEY: secrets[0]?.placeholder ?? '' };
    const made = secretStart('sb_attack', { placeholders }, secrets);
    if (made === undefined) throw new Error('a start with a secret made no CA');
    writeFileSync(file('ca.pem'), made.ca.cert);
    writeFileSync(file('ca.key'), made.ca.key);
    // What the sandbox trusts: the bundle bound over its system bundle.
    writeFileSync(file('bundle.pem'), made.files[0]?.content ?? '');
    signLeaf('pub.test', 'DNS:pub.test');
    signLeaf('evil.test', 'DNS:evil.test');
    signLeaf('addr', 'IP:127.0.0.1');
  });
  afterAll(() => {
    for (const server of servers) server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('openssl verify refuses a leaf for an unbound name or an address; the bound host verifies', () => {
    expect(verify(file('pub.test.pem'))).toMatchObject({ ok: true });
    const evil = verify(file('evil.test.pem'));
    expect(evil.ok).toBe(false);
    expect(evil.out).toContain('permitted subtree violation');
    const addr = verify(file('addr.pem'));
    expect(addr.ok).toBe(false);
    expect(addr.out).toContain('excluded subtree violation');
  });

  it('curl and Node with the sandbox bundle refuse the server; the bound host answers', async () => {
    const curl = async (name: string, port: number): Promise<{ exitCode?: number; all?: string }> =>
      execa(
        'curl',
        [
          ...['-sS', '-m', '10', '--noproxy', '*', '--cacert', file('bundle.pem')],
          ...(name === '127.0.0.1' ? [] : ['--resolve', `${name}:${port}:127.0.0.1`]),
          `https://${name}:${port}/`,
        ],
        { reject: false, all: true },
      );
    const good = await curl('pub.test', await serve('pub.test'));
    expect(good).toMatchObject({ exitCode: 0, all: 'hello from pub.test' });
    const evil = await curl('evil.test', await serve('evil.test'));
    expect(evil.exitCode).toBe(60);
    expect(evil.all).toContain('permitted subtree violation');
    const addr = await curl('127.0.0.1', await serve('addr'));
    expect(addr.exitCode).toBe(60);
    expect(addr.all).toContain('excluded subtree violation');
    // Node's TLS (fetch, https) in the sandbox reads the same CA through NODE_EXTRA_CA_CERTS.
    const port = await serve('evil.test');
    const socket = connect({
      host: '127.0.0.1',
      port,
      servername: 'evil.test',
      ca: readFileSync(file('ca.pem')),
    });
    const [err] = (await once(socket, 'error')) as [Error];
    socket.destroy();
    // Node names no code for this verify error (UNSPECIFIED); its message is OpenSSL's.
    expect(err.message).toBe('permitted subtree violation');
  });
});
