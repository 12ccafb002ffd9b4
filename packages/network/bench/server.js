// The bench's test network: a namespace with a veth to the host (TEST-NET-2 addresses: only this
// machine), the test server process inside it, a certificate for `bench.test` and a hosts file naming it
// for the policy point. `stop()` removes all of it and is safe to call more than once.
import { execFile, spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import process from 'node:process';
import { promisify } from 'node:util';

export const run = promisify(execFile);
/** Aborted when the bench stops: the curls and srt it runs on the host end with it (SIGTERM). */
export const stopping = new AbortController();
export const SERVER = '198.51.100.10';
export const NAME = 'bench.test';
const NS = `afbench${process.pid}`;
const HOST_IF = `afb${process.pid}`.slice(0, 15);

/** Waits for the server's `ready` line (or its exit). */
function ready(child) {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      if (out.includes('ready\n')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`test server exited (${code}) before it was ready`)));
  });
}

export async function startTestNet(dir) {
  let server;
  let exited;
  const stop = async () => {
    // `exited` was made at spawn: a server that already died (a signal leaves exitCode null) is not
    // waited for again, which would leave the bench with nothing to run and exit before the rest.
    if (server !== undefined) {
      server.kill('SIGTERM');
      await exited;
    }
    await run('ip', ['netns', 'del', NS]).catch(() => undefined);
    await run('ip', ['link', 'del', HOST_IF]).catch(() => undefined);
  };
  try {
    await run('ip', ['netns', 'add', NS]);
    await run('ip', ['link', 'add', HOST_IF, 'type', 'veth', 'peer', 'name', 'p0', 'netns', NS]);
    await run('ip', ['addr', 'add', '198.51.100.1/24', 'dev', HOST_IF]);
    await run('ip', ['link', 'set', HOST_IF, 'up']);
    await run('ip', ['-n', NS, 'addr', 'add', `${SERVER}/24`, 'dev', 'p0']);
    await run('ip', ['-n', NS, 'link', 'set', 'p0', 'up']);
    await run('ip', ['-n', NS, 'link', 'set', 'lo', 'up']);
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    await run('openssl', [
      ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
      ...['-keyout', key, '-out', cert, '-days', '1'],
      ...['-subj', `/CN=${NAME}`, '-addext', `subjectAltName=DNS:${NAME}`],
    ]);
    const main = new URL('./server-main.js', import.meta.url).pathname;
    server = spawn('ip', ['netns', 'exec', NS, process.execPath, main, SERVER, cert, key], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    exited = new Promise((resolve) => {
      server.once('exit', resolve);
      server.once('error', resolve);
    });
    await ready(server);
    const hostsFile = join(dir, 'hosts');
    await writeFile(hostsFile, `${SERVER} ${NAME}\n`);
    return { hostsFile, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
