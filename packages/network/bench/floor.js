// The set-up floor lines' relays, each a process of its own on the host between curl and the bench's
// server: floor-relay.c (built here with cc into the bench's temporary directory; not built: the line
// says why) and a minimal Node TCP proxy (connect and pipe, no HTTP, no policy). Both print their port.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import process from 'node:process';
import { run } from './server.js';

const NODE_PIPE = `
const net = require('node:net');
const [address, port] = process.argv.slice(1);
const server = net.createServer({ noDelay: true }, (c) => {
  const u = net.connect({ host: address, port: Number(port), noDelay: true });
  c.pipe(u).on('error', () => c.destroy());
  u.pipe(c).on('error', () => u.destroy());
  c.on('error', () => u.destroy());
  u.on('error', () => c.destroy());
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
process.stdin.on('end', () => process.exit(0)).resume();`;

/** Starts `argv` and resolves to { port, stop } once it printed its port. */
function started(argv) {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const m = /^(\d+)\n/.exec(out);
      if (m !== null) resolve({ port: Number(m[1]), pid: child.pid, stop: () => child.kill('SIGTERM') });
    });
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`${argv[0]} exited (${code})`)));
  });
}

/** The two floor relays to `address:port`; a relay that cannot start is { error }. */
export async function startFloors(dir, address, port) {
  const floors = {};
  try {
    const binary = join(dir, 'floor-relay');
    const source = new URL('./floor-relay.c', import.meta.url).pathname;
    await run('cc', ['-O2', '-pthread', '-o', binary, source]);
    floors.c = await started([binary, address, String(port)]);
  } catch (err) {
    floors.c = { error: `the C floor relay did not start: ${String(err.message).split('\n')[0]}` };
  }
  try {
    floors.node = await started([process.execPath, '-e', NODE_PIPE, address, String(port)]);
  } catch (err) {
    floors.node = { error: `the Node floor proxy did not start: ${String(err.message).split('\n')[0]}` };
  }
  return floors;
}
