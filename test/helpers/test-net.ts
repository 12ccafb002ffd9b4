// Test hosts for the network tests: a network namespace of the test's own, joined to the host's by a
// veth pair, with a private address (10.231.0.2) and two public-range ones (TEST-NET-3 203.0.113.10 and
// .20; the host side holds .1 of each), an HTTP server on port 80, an HTTPS server on 443 (a
// self-signed certificate for the test names; it records the SNI it was sent) and an echo server on 7,
// all listening in that namespace. A hosts file maps the test names to them for the policy point. Only
// addresses on this machine are ever used. close() removes everything.
import { execFile } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { openSocketInNetns } from '@agentfense/network';

const run = promisify(execFile);

export const TEST_ADDRESSES = {
  /** The host's own side of the link (never reachable from a sandbox). */
  hostPrivate: '10.231.0.1',
  hostPublic: '203.0.113.1',
  /** priv.test */
  private: '10.231.0.2',
  /** pub.test, other.test */
  public: '203.0.113.10',
  /** evil.test */
  evil: '203.0.113.20',
} as const;

export interface TestNet {
  /** The test hosts' namespace (`openSocketInNetns` opens more servers there). */
  readonly nsPath: string;
  /** `ADDRESS NAME` lines for the policy point (ControlPlane option network.hostsFile). */
  readonly hostsFile: string;
  /** Server names TLS clients sent to the HTTPS server, in order. */
  readonly sniSeen: string[];
  /** Requests the HTTP server answered (`METHOD host path`). */
  readonly httpSeen: string[];
  /** UDP datagrams that reached the test host. */
  udpSeen(): number;
  close(): Promise<void>;
}

const ip = (args: readonly string[]): Promise<unknown> => run('ip', [...args]);

/**
 * Removes the test networks of test processes that are gone (killed before their clean-up ran): their
 * host-side addresses are this one's, and would take its traffic.
 */
async function removeStaleTestNets(): Promise<void> {
  const { stdout } = await run('ip', ['netns', 'list']);
  for (const match of stdout.matchAll(/^aft(\d+)\b/gm)) {
    const pid = Number(match[1]);
    const alive = await access(`/proc/${String(pid)}`).then(
      () => true,
      () => false,
    );
    if (alive) continue;
    await ip(['netns', 'del', `aft${String(pid)}`]).catch(() => undefined);
    await ip(['link', 'del', `afh${String(pid)}`.slice(0, 15)]).catch(() => undefined);
  }
}

export async function makeTestNet(): Promise<TestNet> {
  await removeStaleTestNets();
  const name = `aft${process.pid}`;
  const hostIf = `afh${process.pid}`.slice(0, 15);
  const dir = await mkdtemp(join(tmpdir(), 'af-testnet-'));
  const servers: Server[] = [];
  const closeAll = async (): Promise<void> => {
    for (const server of servers) server.close();
    await ip(['netns', 'del', name]).catch(() => undefined);
    await ip(['link', 'del', hostIf]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await ip(['netns', 'add', name]);
    await ip(['link', 'add', hostIf, 'type', 'veth', 'peer', 'name', 'p0', 'netns', name]);
    await ip(['addr', 'add', `${TEST_ADDRESSES.hostPrivate}/24`, 'dev', hostIf]);
    await ip(['addr', 'add', `${TEST_ADDRESSES.hostPublic}/24`, 'dev', hostIf]);
    await ip(['link', 'set', hostIf, 'up']);
    for (const address of [TEST_ADDRESSES.private, TEST_ADDRESSES.public, TEST_ADDRESSES.evil]) {
      await ip(['-n', name, 'addr', 'add', `${address}/24`, 'dev', 'p0']);
    }
    await ip(['-n', name, 'link', 'set', 'p0', 'up']);
    await ip(['-n', name, 'link', 'set', 'lo', 'up']);
    const nsPath = `/run/netns/${name}`;
    const fd = (type: 'tcp' | 'udp', port: number): number =>
      openSocketInNetns(nsPath, { family: 4, type, address: '0.0.0.0', port });

    const httpSeen: string[] = [];
    const http = createHttpServer((req, res) => {
      httpSeen.push(`${req.method ?? ''} ${req.headers.host ?? ''} ${req.url ?? ''}`);
      req.resume();
      res.end(`hello from ${req.headers.host ?? '?'}\n`);
    });
    http.listen({ fd: fd('tcp', 80) });
    servers.push(http);

    await run('openssl', [
      ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
      ...['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '2'],
      ...['-subj', '/CN=pub.test', '-addext', 'subjectAltName=DNS:pub.test,DNS:evil.test,DNS:other.test'],
    ]);
    const sniSeen: string[] = [];
    const https = createHttpsServer(
      {
        key: await readFile(join(dir, 'key.pem')),
        cert: await readFile(join(dir, 'cert.pem')),
        SNICallback: (servername, done) => {
          sniSeen.push(servername);
          done(null, undefined);
        },
      },
      (req, res) => {
        req.resume();
        res.end(`tls hello from ${req.headers.host ?? '?'}\n`);
      },
    );
    https.listen({ fd: fd('tcp', 443) });
    servers.push(https);

    // A peer reset (a policy point killed at its bound) is no error of the test's.
    const echo = createServer((socket) => socket.on('error', () => socket.destroy()).pipe(socket));
    echo.listen({ fd: fd('tcp', 7) });
    servers.push(echo);

    let udp = 0;
    const udpServer = createSocket('udp4');
    udpServer.on('message', () => (udp += 1));
    udpServer.bind({ fd: fd('udp', 9) });

    const hostsFile = join(dir, 'hosts');
    await writeFile(
      hostsFile,
      [
        `${TEST_ADDRESSES.public} pub.test other.test`,
        `${TEST_ADDRESSES.evil} evil.test`,
        `${TEST_ADDRESSES.private} priv.test`,
        `169.254.169.254 metadata.test`,
        `${TEST_ADDRESSES.hostPrivate} host.test`,
        '',
      ].join('\n'),
    );
    return {
      nsPath,
      hostsFile,
      sniSeen,
      httpSeen,
      udpSeen: () => udp,
      close: async () => {
        udpServer.close();
        await closeAll();
      },
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}
