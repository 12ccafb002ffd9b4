// Network policy benchmark (`pnpm bench:network`, root): what the policy point costs a sandbox's traffic,
// measured side by side in one run against the same transfers made from the host directly.
//   1. a 1 GiB HTTPS download (curl, TLS end to end) through the explicit proxy (HTTPS_PROXY → CONNECT)
//      and transparently (the NAT redirect), against curl on the host: MB/s and the ratio;
//   2. connection set-up: time to the first byte of a small HTTP answer (100 sequential requests, p50),
//      through the policy point and directly; the difference is what the policy point adds;
//   3. isolation: sandbox B's 256 MiB download alone, then while sandbox A holds 100 concurrent downloads.
// The server runs in a network namespace this script makes (veth to the host, TEST-NET-2 addresses: only
// this machine), and everything is removed at the end, on failure and on SIGINT/SIGTERM too.
import { execFile } from 'node:child_process';
import console from 'node:console';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { ControlPlane } from '../../control/dist/index.js';
import { openSocketInNetns } from '../dist/index.js';

const run = promisify(execFile);
const NS = `afbench${process.pid}`;
const HOST_IF = `afb${process.pid}`.slice(0, 15);
const SERVER = '198.51.100.10';
const GiB = 1024 ** 3;
const ZERO = Buffer.alloc(1024 * 1024);

function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/** Serves `/bytes/N` (N zero bytes) and `/small`. */
function handler(req, res) {
  const match = /^\/bytes\/(\d+)$/.exec(req.url ?? '');
  if (match === null) return res.end('ok\n');
  let left = Number(match[1]);
  res.writeHead(200, { 'content-length': String(left) });
  const pump = () => {
    while (left > 0) {
      const chunk = left >= ZERO.length ? ZERO : ZERO.subarray(0, left);
      left -= chunk.length;
      if (!res.write(chunk)) return void res.once('drain', pump);
    }
    res.end();
  };
  pump();
}

async function setUp(dir) {
  await run('ip', ['netns', 'add', NS]);
  await run('ip', ['link', 'add', HOST_IF, 'type', 'veth', 'peer', 'name', 'p0', 'netns', NS]);
  await run('ip', ['addr', 'add', '198.51.100.1/24', 'dev', HOST_IF]);
  await run('ip', ['link', 'set', HOST_IF, 'up']);
  await run('ip', ['-n', NS, 'addr', 'add', `${SERVER}/24`, 'dev', 'p0']);
  await run('ip', ['-n', NS, 'link', 'set', 'p0', 'up']);
  await run('ip', ['-n', NS, 'link', 'set', 'lo', 'up']);
  await run('openssl', [
    ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
    ...['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1'],
    ...['-subj', '/CN=bench.test', '-addext', 'subjectAltName=DNS:bench.test'],
  ]);
  const fd = (port) =>
    openSocketInNetns(`/run/netns/${NS}`, { family: 4, type: 'tcp', address: SERVER, port });
  const https = createHttpsServer(
    { key: await readFile(join(dir, 'key.pem')), cert: await readFile(join(dir, 'cert.pem')) },
    handler,
  );
  https.listen({ fd: fd(443) });
  const http = createHttpServer({ keepAlive: false }, handler);
  http.listen({ fd: fd(80) });
  await writeFile(join(dir, 'hosts'), `${SERVER} bench.test\n`);
  return [https, http];
}

async function tearDown(servers) {
  for (const server of servers ?? []) server.close();
  await run('ip', ['netns', 'del', NS]).catch(() => undefined);
  await run('ip', ['link', 'del', HOST_IF]).catch(() => undefined);
}

/** curl's figures for one transfer on the host (no sandbox). */
async function hostCurl(args) {
  const { stdout } = await run('curl', ['-s', '-k', '-o', '/dev/null', ...args], {
    env: { PATH: process.env.PATH },
  });
  return stdout;
}

const DOWNLOAD = `curl -s -k -o /dev/null -w '%{speed_download}' --resolve bench.test:443:${SERVER}`;

async function main() {
  const dir = await mkdtemp(join(tmpdir(), 'af-bench-net-'));
  let servers;
  let cp;
  const cleanup = async () => {
    await cp?.close().catch(() => undefined);
    await tearDown(servers);
    await rm(dir, { recursive: true, force: true });
  };
  for (const signal of ['SIGINT', 'SIGTERM'])
    process.once(signal, () => void cleanup().then(() => process.exit(130)));
  try {
    servers = await setUp(dir);
    await mkdir(join(dir, 'repo'));
    cp = await ControlPlane.open({
      dataDir: join(dir, 'data'),
      logger: pino({ level: 'silent' }),
      network: { hostsFile: join(dir, 'hosts') },
    });
    const { id: codebaseId } = await cp.linkCodebase({ path: join(dir, 'repo') });
    const sandbox = async () => {
      const { id } = await cp.createSandbox({
        codebaseId,
        preset: 'agent-safe',
        network: { mode: 'allow', rules: [{ action: 'allow', host: 'bench.test' }] },
      });
      await cp.startSandbox(id);
      return async (command) => {
        const r = await cp.run(id, command, { timeoutMs: 600_000 });
        if (r.exitCode !== 0) throw new Error(`${command}: exit ${r.exitCode}: ${r.stderr}`);
        return r.stdout;
      };
    };
    const a = await sandbox();
    const b = await sandbox();

    console.log('1. 1 GiB HTTPS download (MB/s, 3 rounds, median)');
    const speeds = { host: [], proxy: [], transparent: [] };
    for (let round = 0; round < 3; round++) {
      speeds.host.push(
        Number(
          await hostCurl([
            '-w',
            '%{speed_download}',
            '--resolve',
            `bench.test:443:${SERVER}`,
            `https://bench.test/bytes/${GiB}`,
          ]),
        ),
      );
      speeds.proxy.push(Number(await a(`${DOWNLOAD} https://bench.test/bytes/${GiB}`)));
      speeds.transparent.push(Number(await a(`${DOWNLOAD} --noproxy '*' https://bench.test/bytes/${GiB}`)));
    }
    const mbs = (list) => quantile(list, 0.5) / 1e6;
    const host = mbs(speeds.host);
    for (const [label, list] of Object.entries(speeds)) {
      const v = mbs(list);
      console.log(
        `   ${label.padEnd(12)} ${v.toFixed(0).padStart(5)} MB/s  ${(v / host).toFixed(2)}× the host's  [${list.map((s) => (s / 1e6).toFixed(0)).join(', ')}]${label !== 'host' && v < 500 ? '  (target ≥ 500 MB/s)' : ''}`,
      );
    }

    console.log('2. connection set-up: time to first byte of a small HTTP answer (100 requests, p50)');
    const loop = (extra) =>
      `for i in $(seq 100); do curl -s -o /dev/null -w '%{time_starttransfer}\\n' ${extra} http://bench.test/small; done`;
    const hostTimes = [];
    for (let i = 0; i < 100; i++) {
      hostTimes.push(
        Number(
          await hostCurl([
            '-w',
            '%{time_starttransfer}',
            '--resolve',
            `bench.test:80:${SERVER}`,
            'http://bench.test/small',
          ]),
        ),
      );
    }
    const proxyTimes = (await a(loop(''))).trim().split('\n').map(Number);
    const transparentTimes = (await a(loop(`--noproxy '*' --resolve bench.test:80:${SERVER}`)))
      .trim()
      .split('\n')
      .map(Number);
    const p50 = (list) => quantile(list, 0.5) * 1000;
    for (const [label, list] of [
      ['host', hostTimes],
      ['proxy', proxyTimes],
      ['transparent', transparentTimes],
    ]) {
      const added = p50(list) - p50(hostTimes);
      console.log(
        `   ${label.padEnd(12)} p50 ${p50(list).toFixed(2)} ms${label === 'host' ? '' : `  (+${added.toFixed(2)} ms${added > 1 ? ', target ≤ +1 ms' : ''})`}`,
      );
    }

    console.log("3. isolation: B's 256 MiB download alone, then while A holds 100 concurrent downloads");
    const size = 256 * 1024 * 1024;
    const alone = Number(await b(`${DOWNLOAD} https://bench.test/bytes/${size}`));
    // A's load: 100 downloads at once (curl --parallel), long enough to cover B's measurement.
    const load = a(
      `curl -s -k -Z --parallel-max 100 -o /dev/null ${Array.from({ length: 100 }, () => `https://bench.test/bytes/${16 * 1024 * 1024}`).join(' ')}`,
    ).catch((err) => console.log(`   A's load failed: ${String(err).split('\n')[0].slice(0, 200)}`));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const loaded = Number(await b(`${DOWNLOAD} https://bench.test/bytes/${size}`));
    await load;
    const slower = 1 - loaded / alone;
    console.log(
      `   alone ${(alone / 1e6).toFixed(0)} MB/s, with A's load ${(loaded / 1e6).toFixed(0)} MB/s: ${(slower * 100).toFixed(0)} % slower${slower > 0.1 ? ' (target ≤ 10 %; 2 cores shared by both policy points, both curls and the server)' : ''}`,
    );
  } finally {
    await cleanup();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
