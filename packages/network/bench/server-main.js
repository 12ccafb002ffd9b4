// The bench's test server, a process of its own started inside the bench's namespace (`ip netns exec`):
// HTTPS on :443 and HTTP on :80, `/bytes/N`, `/paced/R` and anything else a small answer. It exits
// when its stdin closes, so it never outlives the bench, even one killed with SIGKILL.
//   node server-main.js ADDRESS CERT KEY [HTTPS_PORT HTTP_PORT]
// Why large writes: with 1 MiB writes and the default 16 KiB high-water mark the server spends its time
// in stream bookkeeping; 4 MiB writes with a 1 MiB mark measured faster than `openssl s_server -WWW` on
// this machine (which also serves one connection at a time, useless for the concurrent step).
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import process from 'node:process';

const [address, certFile, keyFile, httpsPort = '443', httpPort = '80'] = process.argv.slice(2);
const ZERO = Buffer.alloc(4 * 1024 * 1024);
const HIGH_WATER_MARK = 1024 * 1024;

/**
 * `/paced/R`: R bytes a second, a tenth every 100 ms, until the client goes (a steady stream, as a
 * model's streamed answer; what a client paces itself comes in bursts that it then pays off by pausing).
 */
function paced(res, rate) {
  res.writeHead(200, { 'content-type': 'application/octet-stream' });
  const piece = ZERO.subarray(0, Math.max(1, Math.floor(rate / 10)));
  const timer = setInterval(() => res.write(piece), 100);
  res.once('close', () => clearInterval(timer));
}

/** Serves `/bytes/N` (N zero bytes), `/paced/R` and anything else a small answer. */
function handler(req, res) {
  const pace = /^\/paced\/(\d+)$/.exec(req.url ?? '');
  if (pace !== null) return paced(res, Number(pace[1]));
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

const https = createHttpsServer(
  { key: readFileSync(keyFile), cert: readFileSync(certFile), highWaterMark: HIGH_WATER_MARK },
  handler,
);
const http = createHttpServer({ keepAlive: false, highWaterMark: HIGH_WATER_MARK }, handler);
let listening = 0;
for (const [server, port] of [
  [https, Number(httpsPort)],
  [http, Number(httpPort)],
]) {
  server.listen({ host: address, port, backlog: 1024 }, () => {
    if (++listening === 2) process.stdout.write('ready\n');
  });
}
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
