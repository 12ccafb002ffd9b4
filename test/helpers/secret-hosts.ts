// HTTPS hosts for the secrets tests, in the test hosts' namespace (test-net.ts): a test CA standing for
// the public ones (the control plane gets it as network.upstreamCa), a server with a certificate it
// signed for pub.test and other.test, and a forger presenting a self-signed certificate for the same
// names. Each server records what reached it (the Authorization header, URL and body) and answers with
// an echo of that header, so a response carrying a real value can be seen being masked.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { openSocketInNetns } from '@agentfense/network';

export interface Seen {
  readonly host: string;
  readonly authorization: string;
  readonly url: string;
  readonly body: string;
}

export interface TestCerts {
  /** The test CA (PEM): what the policy point verifies the real upstream against. */
  readonly ca: string;
  readonly leaf: { key: string; cert: string };
  readonly forged: { key: string; cert: string };
}

const SUBJECT_ALT = 'subjectAltName=DNS:pub.test,DNS:other.test';

/** Made with openssl once per test file (synchronously: the fixture needs the CA when it starts). */
export function makeTestCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), 'af-secret-certs-'));
  const file = (name: string): string => join(dir, name);
  const openssl = (args: string[]): void => void execFileSync('openssl', args, { stdio: 'ignore' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  try {
    // A CA with the extensions a verifier wants, then a leaf it signs.
    openssl([
      ...['req', '-x509', ...ec, '-keyout', file('ca.key'), '-out', file('ca.pem'), '-days', '2'],
      ...['-subj', '/CN=AgentFense test root CA'],
      ...['-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign'],
    ]);
    openssl(['req', ...ec, '-keyout', file('leaf.key'), '-out', file('leaf.csr'), '-subj', '/CN=pub.test']);
    writeFileSync(file('ext'), `${SUBJECT_ALT}\nextendedKeyUsage=serverAuth\n`);
    openssl([
      ...['x509', '-req', '-in', file('leaf.csr'), '-CA', file('ca.pem'), '-CAkey', file('ca.key')],
      ...['-CAcreateserial', '-out', file('leaf.pem'), '-days', '2', '-extfile', file('ext')],
    ]);
    openssl([
      ...['req', '-x509', ...ec, '-keyout', file('forged.key'), '-out', file('forged.pem'), '-days', '2'],
      ...['-subj', '/CN=pub.test', '-addext', SUBJECT_ALT],
    ]);
    const read = (name: string): string => readFileSync(file(name), 'utf8');
    return {
      ca: read('ca.pem'),
      leaf: { key: read('leaf.key'), cert: read('leaf.pem') },
      forged: { key: read('forged.key'), cert: read('forged.pem') },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** An HTTPS server on `port` of every test address; returns it and what reached it. */
export function serveHttps(
  nsPath: string,
  port: number,
  tls: { key: string; cert: string },
): { server: Server; seen: Seen[] } {
  const seen: Seen[] = [];
  const server = createServer(tls, (req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const authorization = req.headers.authorization ?? '';
      seen.push({ host: req.headers.host ?? '', authorization, url: req.url ?? '', body });
      res.end(`echo ${authorization}\n`);
    });
  });
  server.listen({ fd: openSocketInNetns(nsPath, { family: 4, type: 'tcp', address: '0.0.0.0', port }) });
  return { server, seen };
}

/** What an upstream served for a whole describe block has been sent. */
export interface Upstream {
  /** Every request that reached it, in order. */
  readonly seen: readonly Seen[];
  /** The Authorization header the request for `url` arrived with. */
  readonly authAt: (url: string) => string | undefined;
}

/** serveHttps on port 8443 of the namespace `nsPath()` names, from beforeAll to afterAll. */
export function useHttpsUpstream(nsPath: () => string, tls: { key: string; cert: string }): Upstream {
  let server: Server | undefined;
  let seen: Seen[] = [];
  beforeAll(() => {
    ({ server, seen } = serveHttps(nsPath(), 8443, tls));
  });
  afterAll(() => server?.close());
  return {
    get seen() {
      return seen;
    },
    authAt: (url) => seen.find((s) => s.url === url)?.authorization,
  };
}
