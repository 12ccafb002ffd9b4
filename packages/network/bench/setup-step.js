// 2. Connection set-up: time to the first byte of a small answer on a new connection, p50 of 100, for
// plain HTTP and HTTPS, through the policy point (explicit proxy; transparent) and beside it from the
// host: curl straight to the server, srt's proxy (HTTP), and the floor of any relay here, curl through
// a process that only accepts, connects and copies (floor-relay.c; a minimal Node TCP proxy beside it).
import console from 'node:console';
import { cpuNs, policyPointPid } from './cpu.js';
import { startFloors } from './floor.js';
import { NAME, SERVER, stopping } from './server.js';
import { line, median, verdict } from './report.js';
import { hostCurl } from './steps.js';
import { srtRun } from './srt.js';

/** Time to the first byte of N small answers (`sh -c SCRIPT loop N CURL-ARGS…`), each a new connection. */
const LOOP = [
  'sh',
  '-c',
  'n=$1; shift; i=0; while [ "$i" -lt "$n" ]; do curl -s -k -o /dev/null -w "%{time_starttransfer}\\n" "$@" || exit 1; i=$((i+1)); done',
  'loop',
];
const times = (stdout) => stdout.trim().split('\n').map(Number);
const ms = (list) => median(list) * 1000;

/**
 * Blocks of 10 that alternate in a turning order, so a busy moment of the machine weighs on all alike
 * (the block right after another kind of work measured slower here, up to +3 ms, whichever line it was).
 */
export async function setupStep({ a, handOverAtOnce, srt, dir }) {
  console.log('2. connection set-up: time to first byte of a small answer (p50 of 100, new connections)');
  const http = `http://${NAME}/small`;
  const https = `https://${NAME}/small`;
  const pin = (port) => ['--resolve', `${NAME}:${port}:${SERVER}`];
  const floors = await startFloors(dir, SERVER, 80);
  const lists = {};
  const takers = [];
  /** CPU (ns) the relay of a line spent over its connections, and how many: key -> { ns, n }. */
  const cpu = {};
  /** Runs `fn` (returning first-byte times) and adds what `pid` spent meanwhile to the line's CPU. */
  const measured = async (key, pid, fn) => {
    const before = pid === undefined ? NaN : await cpuNs(pid);
    const got = await fn();
    const spent = pid === undefined ? NaN : (await cpuNs(pid)) - before;
    if (Number.isFinite(spent)) {
      cpu[key] ??= { ns: 0, n: 0 };
      cpu[key].ns += spent;
      cpu[key].n += got.length;
    }
    return got;
  };
  /** A line whose 10 first bytes `take()` returns; a line that fails once is dropped with its reason. */
  const add = (key, take) => {
    lists[key] = [];
    takers.push(async () => {
      if (typeof lists[key] === 'string') return;
      lists[key] = await take(key).then(
        (got) => [...lists[key], ...got],
        (err) => `failed: ${String(err?.message ?? err).split('\n')[0]}`,
      );
    });
  };
  const pointOf = { a: await policyPointPid(a.id) };
  if (handOverAtOnce !== undefined) pointOf.atOnce = await policyPointPid(handOverAtOnce.id);
  const fromHost = (args) => async () => {
    const got = [];
    for (let i = 0; i < 10; i++) got.push(Number(await hostCurl(['-w', '%{time_starttransfer}', ...args])));
    return got;
  };
  // As a program does: the name asked of the sandbox's DNS first (not timed), then its address dialled;
  // the policy point then knows the name for the address and dials it at accept.
  const transparent =
    (port, url, run = a, pid = pointOf.a) =>
    async (key) => {
      await run(['getent', 'hosts', NAME]);
      return measured(key, pid, async () =>
        times(await run([...LOOP, '10', '--noproxy', '*', ...pin(port), url])),
      );
    };
  const proxied =
    (url, run = a, pid = pointOf.a) =>
    (key) =>
      measured(key, pid, async () => times(await run([...LOOP, '10', url])));
  add('host', fromHost([...pin(80), http]));
  add('proxy', proxied(http));
  add('transparent', transparent(80, http));
  add('hostTls', fromHost([...pin(443), https]));
  add('proxyTls', proxied(https));
  add('transparentTls', transparent(443, https));
  // The same HTTPS lines where each tunnel goes to the kernel relay at once (A/B of the hand-over point).
  if (handOverAtOnce !== undefined) {
    add('proxyTlsAtOnce', proxied(https, handOverAtOnce, pointOf.atOnce));
    add('transparentTlsAtOnce', transparent(443, https, handOverAtOnce, pointOf.atOnce));
  }
  if (srt.error === undefined)
    add('srt', async () =>
      times(await srtRun(srt.settings, [...LOOP, '10', http], srt.dir, stopping.signal)),
    );
  for (const [key, floor] of Object.entries(floors)) {
    if (floor.error === undefined)
      add(key, (k) => measured(k, floor.pid, fromHost([`http://127.0.0.1:${floor.port}/small`])));
    else lists[key] = floor.error;
  }
  try {
    for (let block = 0; block < 10; block++) {
      for (let k = 0; k < takers.length; k++) await takers[(block + k) % takers.length]();
    }
  } finally {
    for (const floor of Object.values(floors)) floor.stop?.();
  }
  const figure = (key) => (typeof lists[key] === 'string' ? NaN : ms(lists[key]));
  const added = (key, base) => {
    const d = figure(key) - figure(base);
    return `${d < 0 ? '−' : '+'}${Math.abs(d).toFixed(2)} ms`;
  };
  /** The relay's CPU per connection on a line (the policy point's, both threads; a floor's). */
  const perConnection = (key) => (cpu[key].ns / cpu[key].n / 1e6).toFixed(2);
  const cpuOf = (key) => (cpu[key] === undefined ? '' : `  (its CPU ${perConnection(key)} ms a connection)`);
  line('host, HTTP (curl, no sandbox)', `${figure('host').toFixed(2)} ms`);
  line('host, HTTPS', `${figure('hostTls').toFixed(2)} ms`);
  const floorLines = [
    ['c', 'floor: C relay (accept, connect, copy)'],
    ['node', 'floor: minimal Node TCP proxy'],
    ['srt', "srt's proxy"],
  ];
  for (const [key, label] of floorLines) {
    if (lists[key] === undefined) continue;
    if (typeof lists[key] === 'string') line(label, 'n/a', lists[key]);
    else line(label, `${figure(key).toFixed(2)} ms`, `${added(key, 'host')}${cpuOf(key)}`);
  }
  const rows = [];
  for (const [key, base, label] of [
    ['proxy', 'host', 'HTTP, explicit proxy'],
    ['transparent', 'host', 'HTTP, transparent'],
    ['proxyTls', 'hostTls', 'HTTPS, explicit proxy (CONNECT)'],
    ['transparentTls', 'hostTls', 'HTTPS, transparent (SNI)'],
    ['proxyTlsAtOnce', 'hostTls', 'HTTPS, explicit proxy (CONNECT), relay hand-over at once'],
    ['transparentTlsAtOnce', 'hostTls', 'HTTPS, transparent (SNI), relay hand-over at once'],
  ]) {
    if (lists[key] === undefined) continue;
    if (typeof lists[key] === 'string') {
      line(label, 'n/a', lists[key]);
      continue;
    }
    const met = figure(key) - figure(base) <= 1;
    line(label, `${figure(key).toFixed(2)} ms`, `${added(key, base)}  ${verdict(met)}${cpuOf(key)}`);
    const beside = [`host ${figure(base).toFixed(2)} ms`];
    if (cpu[key] !== undefined) beside.push(`policy point CPU ${perConnection(key)} ms a connection`);
    if (base === 'host') {
      for (const [floor, name] of [
        ['c', 'C relay floor'],
        ['srt', 'srt'],
      ])
        if (Array.isArray(lists[floor])) beside.push(`${name} ${added(floor, 'host')}`);
    }
    rows.push([
      `time to first byte, small answer, p50 of 100, ${label}`,
      `${added(key, base)} (${figure(key).toFixed(2)} ms)`,
      beside.join('; '),
      '≤ +1 ms',
      verdict(met),
    ]);
  }
  for (const [key, label] of floorLines.slice(0, 2)) {
    if (!Array.isArray(lists[key])) continue;
    rows.push([
      `time to first byte, small answer, p50 of 100, HTTP, ${label} on the host`,
      `${added(key, 'host')} (${figure(key).toFixed(2)} ms)`,
      `host ${figure('host').toFixed(2)} ms${cpu[key] === undefined ? '' : `; its CPU ${perConnection(key)} ms a connection`}`,
      '–',
      'floor',
    ]);
  }
  return rows;
}
