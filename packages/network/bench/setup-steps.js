// Where a new connection's set-up time goes inside the policy point (`node packages/network/bench/setup-steps.js`
// after `pnpm build`): one process, everything on this machine's loopback, no sandbox. A small HTTP
// answer is fetched N times on new connections directly and through the policy point's HTTP flows
// (explicit proxy, its first request carried by http-fast.ts and, beside it, through Node's HTTP server
// and client as a request with a body is; redirected plain HTTP with its connection dialled at accept)
// and through a decided tunnel (alone, and behind a CONNECT exchange), with a timestamp at each step:
// accepted, decided (the rule decision), upstream connected, the CONNECT's 200 read, the hand-over to
// the native relay (with AGENTFENSE_NETWORK_HANDOVER_BYTES=0; a small answer never reaches the default
// threshold), the server's side, the first byte back and the audit record; the p50 of each is printed
// ("request parsed" and "answer parsed" are Node's HTTP stack's, so only its line has them). CPU is the
// whole process's per connection (client, policy point and server alike: a path's excess over direct
// is what the policy point spent), less noisy than the times on a busy machine. The policy itself
// allows everything here (the server is on loopback, which a real policy never allows).
//   SETUP_N (default 300): connections per path; SETUP_ONLY: only the paths whose label includes it.
import console from 'node:console';
import { subscribe } from 'node:diagnostics_channel';
import { once } from 'node:events';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer } from 'node:net';
import process from 'node:process';
import { FlowContext } from '../dist/context.js';
import { HttpFlows } from '../dist/http-proxy.js';
import { Resolver } from '../dist/resolver.js';
import { dial, tunnel } from '../dist/tunnel.js';

const N = Number(process.env.SETUP_N ?? 300);
const now = () => Number(process.hrtime.bigint()) / 1e6;

const marks = {};

class AllowAll extends FlowContext {
  get policy() {
    return { decide: () => ((marks.decided ??= now()), { allowed: true, reason: 'bench' }) };
  }
  nameIsAt() {
    return Promise.resolve(true);
  }
  decideAddress() {
    return { decision: this.policy.decide() };
  }
}

// The answer's way back: written by the server, its head parsed by the policy point's HTTP client.
subscribe('http.server.response.finish', ({ server: from }) => {
  if (from === server) marks.answered = now();
});
subscribe('http.client.response.finish', () => (marks.response ??= now()));
const server = createHttpServer((_req, res) => {
  marks.request = now();
  res.end('small answer');
});
server.on('connection', () => (marks.upstream ??= now()));
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const target = { address: '127.0.0.1', port: server.address().port };

const ctx = new AllowAll({
  policy: { mode: 'open', rules: [] },
  resolver: new Resolver(),
  maxConnections: 1024,
  audit: () => (marks.audited ??= now()),
});
// The hand-over to the native relay, where a tunnel has one (AGENTFENSE_NETWORK_HANDOVER_BYTES=0).
const relay = ctx.relay;
if (relay !== undefined) {
  const handOver = relay.relay.bind(relay);
  relay.relay = (options) => ((marks.handed = now()), handOver(options));
}
const flows = new HttpFlows(ctx);
flows.server.on('request', () => (marks.parsed = now()));
flows.server.on('connect', () => (marks.parsed = now()));
let mode = 'proxy';
const point = createServer({ pauseOnConnect: true, noDelay: true, allowHalfOpen: true }, (client) => {
  marks.accepted = now();
  if (mode === 'proxy') {
    flows.takeProxyClient(client);
    client.resume();
    return;
  }
  if (mode === 'node-http') {
    // Node's HTTP server and client, as a request with a body (or any after the first) takes.
    flows.server.emit('connection', client);
    client.resume();
    return;
  }
  if (mode === 'relay') {
    // A decided tunnel without a CONNECT exchange: the hand-over to the relay and its first bytes alone.
    const upstream = dial(target.address, target.port);
    const dest = { name: 'bench.test', ...target };
    tunnel({ ctx, client, upstream, dest, via: 'transparent', decision: { allowed: true, reason: 'bench' } });
    return;
  }
  const early = dial(target.address, target.port);
  early.once('connect', () => {
    early.pause();
    flows.takeTransparent(client, target, early);
    client.resume();
  });
});
point.listen(0, '127.0.0.1');
await once(point, 'listening');
const pointPort = point.address().port;

const REQUEST = (path) => `GET ${path} HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n`;

async function fetchOnce(port, path, connectTo) {
  for (const key of Object.keys(marks)) delete marks[key];
  const cpu = process.cpuUsage();
  const start = now();
  const socket = connect({ port, host: '127.0.0.1', noDelay: true });
  await once(socket, 'connect');
  marks.connected = now();
  if (connectTo !== undefined) {
    // A CONNECT exchange first; the request then goes inside the tunnel.
    socket.write(`CONNECT ${connectTo} HTTP/1.1\r\nHost: ${connectTo}\r\n\r\n`);
    await once(socket, 'data');
    marks.established = now();
  }
  socket.write(REQUEST(path));
  await once(socket, 'data');
  const first = now();
  socket.destroy();
  await new Promise((resolve) => setImmediate(resolve)); // the close's own work counts too
  const used = process.cpuUsage(cpu);
  const at = (key) => (marks[key] === undefined ? undefined : marks[key] - start);
  return {
    total: first - start,
    cpu: (used.user + used.system) / 1000,
    connected: at('connected'),
    accepted: at('accepted'),
    parsed: at('parsed'),
    upstream: at('upstream'),
    request: at('request'),
    answered: at('answered'),
    response: at('response'),
    decided: at('decided'),
    established: at('established'),
    handed: at('handed'),
    audited: at('audited'),
  };
}

const median = (list) => {
  const sorted = list.filter((v) => v !== undefined).sort((a, b) => a - b);
  return sorted.length === 0 ? NaN : sorted[Math.floor(sorted.length / 2)];
};

const paths = [
  ['direct', () => fetchOnce(target.port, '/')],
  [
    'explicit proxy (absolute-form)',
    () => ((mode = 'proxy'), fetchOnce(pointPort, `http://127.0.0.1:${target.port}/`)),
  ],
  [
    "explicit proxy through Node's HTTP stack (a request with a body)",
    () => ((mode = 'node-http'), fetchOnce(pointPort, `http://127.0.0.1:${target.port}/`)),
  ],
  ['redirected plain HTTP (dialled at accept)', () => ((mode = 'transparent'), fetchOnce(pointPort, '/'))],
  ['decided tunnel (native relay or Node pipe)', () => ((mode = 'relay'), fetchOnce(pointPort, '/'))],
  [
    'explicit proxy CONNECT, then the request in the tunnel',
    () => ((mode = 'proxy'), fetchOnce(pointPort, '/', `127.0.0.1:${target.port}`)),
  ],
];
// SETUP_ONLY: the paths whose label includes it (and direct).
const ONLY = process.env.SETUP_ONLY;
if (ONLY !== undefined) paths.splice(1, paths.length, ...paths.slice(1).filter(([l]) => l.includes(ONLY)));
const results = new Map(paths.map(([label]) => [label, []]));
// Interleaved, so a busy moment of the machine weighs on every path alike.
for (let i = 0; i < N; i++) for (const [label, take] of paths) results.get(label).push(await take());

console.log(`p50 of ${N} new connections each, ms from connect() (load: ${process.env.LOAD ?? '?'})`);
console.log(
  '| path | connected | accepted | decided | request parsed | upstream connected | CONNECT answered | handed to relay | server has request | server answered | answer parsed | first byte | audited | CPU |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const [label, list] of results) {
  const col = (key) => {
    const v = median(list.map((r) => r[key]));
    return Number.isNaN(v) ? '–' : v.toFixed(3);
  };
  console.log(
    `| ${label} | ${col('connected')} | ${col('accepted')} | ${col('decided')} | ${col('parsed')} | ${col('upstream')} | ${col('established')} | ${col('handed')} | ${col('request')} | ${col('answered')} | ${col('response')} | ${col('total')} | ${col('audited')} | ${col('cpu')} |`,
  );
}
server.close();
point.close();
process.exit(0);
