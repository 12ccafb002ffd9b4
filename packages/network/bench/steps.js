// The bench's three measurements, each side by side in one run with the same transfer made without the
// policy point (curl on the host) and, for the download, through srt's proxy. Each returns rows for the
// summary table: [line, ours, beside it, target, verdict].
import console from 'node:console';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { NAME, SERVER, run, stopping } from './server.js';
import { firstLine, line, mbs, median, verdict } from './report.js';
import { srtRun } from './srt.js';

const GiB = 1024 ** 3;
const CURL = ['curl', '-s', '-k', '-o', '/dev/null'];
const SPEED = ['-w', '%{speed_download}'];
const url = (scheme, path) => `${scheme}://${NAME}${path}`;

/** curl on the host, the server's name pinned to its address (no proxy, no sandbox). */
export async function hostCurl(args) {
  const { stdout } = await run('curl', [...CURL.slice(1), ...args], {
    env: { PATH: process.env.PATH },
    signal: stopping.signal,
  });
  return stdout;
}

/** 1. A 1 GiB HTTPS download: host, srt, our explicit proxy, our transparent path; medians of `rounds`. */
export async function downloadStep({ a, handOverAtOnce, srt, rounds }) {
  console.log(`1. 1 GiB HTTPS download (MB/s, median of ${rounds}, the four interleaved)`);
  const big = url('https', `/bytes/${GiB}`);
  const pin = ['--resolve', `${NAME}:443:${SERVER}`];
  const speeds = { host: [], srt: [], proxy: [], transparent: [] };
  let srtError = srt.error;
  for (let round = 0; round < rounds; round++) {
    speeds.host.push(Number(await hostCurl([...SPEED, ...pin, big])));
    if (srtError === undefined) {
      try {
        speeds.srt.push(
          Number(await srtRun(srt.settings, [...CURL, ...SPEED, big], srt.dir, stopping.signal)),
        );
      } catch (err) {
        srtError = `srt failed: ${firstLine(err)}`;
      }
    }
    speeds.proxy.push(Number(await a([...CURL, ...SPEED, ...pin, big])));
    speeds.transparent.push(Number(await a([...CURL, ...SPEED, ...pin, '--noproxy', '*', big])));
    // The same download where the tunnel goes to the kernel relay at once (A/B of the hand-over point).
    if (handOverAtOnce !== undefined)
      (speeds.proxyAtOnce ??= []).push(Number(await handOverAtOnce([...CURL, ...SPEED, ...pin, big])));
  }
  const m = Object.fromEntries(Object.entries(speeds).map(([k, v]) => [k, v.length ? median(v) : NaN]));
  const all = (k) => `[${speeds[k].map(mbs).join(', ')}]`;
  line('host (curl, no sandbox)', `${mbs(m.host)} MB/s`, all('host'));
  if (srtError === undefined)
    line("srt's proxy", `${mbs(m.srt)} MB/s`, `${(m.srt / m.host).toFixed(2)}× host  ${all('srt')}`);
  else line("srt's proxy", 'n/a', srtError);
  if (speeds.proxyAtOnce !== undefined)
    line(
      'explicit proxy, relay hand-over at once',
      `${mbs(m.proxyAtOnce)} MB/s`,
      `${(m.proxyAtOnce / m.host).toFixed(2)}× host  ${all('proxyAtOnce')}`,
    );
  const rows = [];
  for (const [key, label] of [
    ['proxy', 'explicit proxy (CONNECT)'],
    ['transparent', 'transparent'],
  ]) {
    const vsSrt = srtError === undefined ? `, ${(m[key] / m.srt).toFixed(2)}× srt` : '';
    const met = m[key] >= 500e6 && (srtError !== undefined || m[key] >= m.srt);
    line(
      label,
      `${mbs(m[key])} MB/s`,
      `${(m[key] / m.host).toFixed(2)}× host${vsSrt}  ${all(key)}  ${verdict(met)}`,
    );
    rows.push([
      `1 GiB HTTPS download, ${label}`,
      `${mbs(m[key])} MB/s`,
      `host ${mbs(m.host)} MB/s; srt ${srtError === undefined ? `${mbs(m.srt)} MB/s` : 'not measured'}`,
      key === 'proxy' ? '≥ 500 MB/s and ≥ srt' : '≥ 500 MB/s',
      srtError === undefined || key !== 'proxy' ? verdict(met) : `${verdict(met)} (srt not measured)`,
    ]);
  }
  return rows;
}

/** Established TCP connections from this host (the policy points dial from it) to the server's :443. */
async function connectionsToServer() {
  const { stdout } = await run('ss', ['-Htn', 'state', 'established', 'dst', `${SERVER}:443`]);
  return stdout.split('\n').filter((l) => l.trim() !== '').length;
}

/**
 * 3. Isolation: B's download alone, then while A holds 100 concurrent downloads (each paced to
 * `rate` by the server, BENCH_LOAD_RATE); the same made from the host beside it.
 */
export async function isolationStep({ a, b, rounds }) {
  const size = 256 * 1024 * 1024;
  // The load is A's 100 connections, paced so that their bytes do not take the two cores from B (the
  // host's slowdown under the same load, printed beside it, shows what the machine itself loses).
  const rate = Number(process.env.BENCH_LOAD_RATE ?? 131_072);
  console.log(
    `3. isolation: B's 256 MiB download (median of ${rounds}) alone, then while A holds 100 concurrent downloads (${rate / 1024} KiB/s each)`,
  );
  const big = url('https', `/bytes/${size}`);
  const pin = ['--resolve', `${NAME}:443:${SERVER}`];
  const loadArgs = ['-Z', '--parallel-max', '100', ...pin];
  const loadUrls = Array.from({ length: 100 }, () => url('https', `/paced/${rate}`));
  /** One download while `startLoad(signal)` holds 100 connections; the load ends before it returns. */
  const underLoad = async (download, startLoad) => {
    const before = await connectionsToServer();
    const abort = new AbortController();
    // Settled is a failure until it is aborted: the load never ends by itself (the server paces it
    // without end). Caught at once, so a failed load is reported, not an unhandled rejection.
    let ended;
    const load = startLoad(abort.signal).then(
      () => (ended ??= new Error("A's load ended before it was stopped")),
      (err) => (ended ??= err),
    );
    try {
      for (let waited = 0; (await connectionsToServer()) < before + 100; waited += 100) {
        if (ended !== undefined) throw ended;
        if (waited > 30_000) throw new Error('the 100 concurrent downloads did not all connect within 30 s');
        await sleep(100);
      }
      await sleep(1000);
      const speed = Number(await download());
      if (ended !== undefined) throw ended;
      return speed;
    } finally {
      abort.abort();
      await load;
    }
  };
  const bDownload = () => b([...CURL, ...SPEED, ...pin, big]);
  const hDownload = () => hostCurl([...SPEED, ...pin, big]);
  const loadFromA = (signal) =>
    a([...CURL.slice(0, 3), ...loadArgs, ...loadUrls.flatMap((u) => ['-o', '/dev/null', u])], {
      signal,
      allowCancel: true,
    });
  const loadFromHost = (signal) =>
    run('curl', ['-s', '-k', ...loadArgs, ...loadUrls.flatMap((u) => ['-o', '/dev/null', u])], {
      signal: AbortSignal.any([signal, stopping.signal]),
    }).catch((err) => {
      if (err.name !== 'AbortError') throw err;
    });
  // Alone and loaded alternate, so other work on the machine weighs on both alike.
  const s = { bAlone: [], bLoaded: [], hAlone: [], hLoaded: [] };
  for (let i = 0; i < rounds; i++) {
    s.bAlone.push(Number(await bDownload()));
    s.bLoaded.push(await underLoad(bDownload, loadFromA));
    s.hAlone.push(Number(await hDownload()));
    s.hLoaded.push(await underLoad(hDownload, loadFromHost));
  }
  const [bAlone, bLoaded, hAlone, hLoaded] = [s.bAlone, s.bLoaded, s.hAlone, s.hLoaded].map(median);
  const slower = 1 - bLoaded / bAlone;
  const hostSlower = 1 - hLoaded / hAlone;
  line(
    'host (curl, no sandbox)',
    `${(hostSlower * 100).toFixed(0)} %`,
    `alone ${mbs(hAlone)} MB/s, loaded ${mbs(hLoaded)} MB/s`,
  );
  line(
    'sandbox B',
    `${(slower * 100).toFixed(0)} %`,
    `alone ${mbs(bAlone)} MB/s, loaded ${mbs(bLoaded)} MB/s  ${verdict(slower <= 0.1)}`,
  );
  return [
    [
      `sandbox B's 256 MiB download while A holds 100 downloads (${rate / 1024} KiB/s each)`,
      `${(slower * 100).toFixed(0)} % slower (${mbs(bAlone)} → ${mbs(bLoaded)} MB/s)`,
      `host under the same load: ${(hostSlower * 100).toFixed(0)} % slower`,
      '≤ 10 % slower',
      verdict(slower <= 0.1),
    ],
  ];
}
