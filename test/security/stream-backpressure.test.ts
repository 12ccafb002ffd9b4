// Clients that stop reading: ExecStream calls whose commands write hundreds of megabytes, and paused
// downloads of a large file. Without back-pressure the server went on reading the commands' output and
// the file into its own memory for each of them (its RSS grew by hundreds of MiB and kept growing) and
// the commands never waited. Defence: every stream's unread bytes are bounded per stream and across the
// server; past the bound the source waits (the command blocks on its pipe, as writing to a terminal nobody
// reads, and the file is not read further); a client that reads nothing for the stall time has its
// stream ended with an error saying so and its command stopped (api/stream-budget.ts).
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment --
   gRPC messages are loaded from the .proto at run time (as the SDK's are), so they are untyped here. */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { request, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { client, launchServer, scratch, stopAndCheck, type Served } from '../helpers/http-fixture.js';
import { grpcClient, status, type GrpcClient, type Message } from '../helpers/grpc-client.js';

const MiB = 1024 * 1024;
const STREAMS = 30;
const DOWNLOADS = 300;
/**
 * More than the kernel's socket buffers can take for a reader that stopped: its receive buffer may grow
 * to tcp_rmem's maximum (32 MiB here), the sender's to tcp_wmem's. A file they could hold whole would
 * arrive complete however the server paces it.
 */
const FILE_BYTES = socketBufferMax() + 8 * MiB;
/** Commands that would write this much if their output were read. */
const OUTPUT = 'head -c 200000000 /dev/zero';
/**
 * What serve's resident set may grow by while all of them wait: 64 MiB of stream bytes across the server
 * at most, here 30 × 128 KiB for the streams (each message also serialized once by grpc-js) and one
 * 64 KiB chunk per download, ~40 MiB, plus what the paused commands' launcher had in flight, the
 * connections' own objects and heap growth; measured 55-100 MiB. Without the defence it passed 120 MiB
 * within seconds and kept growing.
 */
const GROWTH_BOUND = 160 * MiB;
/** How much it may still grow over the last seconds of the measurement: it has stopped growing. */
const DRIFT_BOUND = 40 * MiB;

function socketBufferMax(): number {
  const max = (name: string): number =>
    Number(readFileSync(`/proc/sys/net/ipv4/${name}`, 'utf8').trim().split(/\s+/)[2]);
  return max('tcp_rmem') + max('tcp_wmem');
}

/** A process's resident set and its peak since the last reset (/proc/<pid>/status), in bytes. */
async function memoryOf(pid: number): Promise<{ rss: number; peak: number }> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (key: string): number =>
    Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1]) * 1024;
  return { rss: kib('VmRSS'), peak: kib('VmHWM') };
}

/** A request whose answer is not read: its response is paused as soon as its head arrives. */
async function unreadRequest(served: Served, path: string, body?: unknown): Promise<IncomingMessage> {
  const { hostname, port } = new URL(served.url);
  const json = body === undefined ? undefined : JSON.stringify(body);
  const req = request({
    host: hostname,
    port,
    path,
    method: json === undefined ? 'GET' : 'POST',
    agent: false,
    headers: {
      authorization: `Bearer ${served.token as string}`,
      ...(json === undefined ? {} : { 'content-type': 'application/json' }),
    },
  });
  onTestFinished(() => void req.destroy());
  req.on('error', () => undefined); // reset by the server: seen through what was read
  req.end(json);
  const [res] = (await once(req, 'response')) as [IncomingMessage];
  res.pause();
  res.on('error', () => undefined);
  return res;
}

/** Reads a paused response from now to its end: what arrived, and whether all of it did. */
async function readRest(res: IncomingMessage): Promise<{ text: string; bytes: number; complete: boolean }> {
  const chunks: Buffer[] = [];
  res.on('data', (chunk: Buffer) => chunks.push(chunk));
  res.resume();
  // Not events.once: a response cut short also emits 'error' ("aborted"), which is what is checked here.
  await new Promise((done) => res.once('close', done));
  const all = Buffer.concat(chunks);
  return { text: all.toString('utf8'), bytes: all.length, complete: res.complete };
}

/** A server, a stored codebase holding the big file, and a running sandbox over it. */
async function setUp(env?: Record<string, string>) {
  const dir = await scratch('af-backpressure-');
  const served = await launchServer(['--grpc-listen', '127.0.0.1:0'], join(dir, 'data'), {
    ...(env === undefined ? {} : { env }),
  });
  onTestFinished(async () => {
    await stopAndCheck(served);
  });
  const api = client(served.url, served.token);
  const target = /grpc:\/\/(\S+) /.exec(served.output())?.[1] as string;
  const grpc: GrpcClient = grpcClient(target, served.token);
  onTestFinished(() => grpc.close());
  const cb = ((await api('POST', '/v1/codebases', { name: 'app' })).json as { id: string }).id;
  const put = await api('PUT', `/v1/codebases/${cb}/files/big.bin`, Buffer.alloc(FILE_BYTES, 7));
  expect(put.status, put.text).toBe(200);
  const created = await api('POST', '/v1/sandboxes', { codebase_id: cb, start: true, preset: 'read-only' });
  const sandbox = created.json as { id: string; status: string };
  expect(sandbox.status, created.text).toBe('SANDBOX_STATUS_RUNNING');
  /** The wait channel of each `head` in the sandbox (`[anon_]pipe_write`: blocked writing its output). */
  const heads = async (): Promise<string[]> => {
    const ps = await api('POST', `/v1/sandboxes/${sandbox.id}/exec`, {
      command: 'for p in $(pgrep -x head); do cat /proc/$p/wchan; echo; done',
    });
    return ((ps.json as { stdout: string }).stdout.match(/\S+/g) ?? []).sort();
  };
  const stream = (command: string): UnreadCall => {
    const call = grpc.open('sandbox', 'ExecStream', { sandbox_id: sandbox.id, command });
    onTestFinished(() => call.cancel());
    // Listened for from the start: a reset call reports its status without being read.
    const status = new Promise<Message>((resolve) => call.once('status', resolve));
    return { call, status };
  };
  return { served, api, grpc, cb, sandbox, heads, stream };
}

/** Waits until `check` holds (checked every 250 ms), for at most `ms`. */
async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((done) => setTimeout(done, 250));
  }
}

/** An ExecStream nobody reads yet, and the status it will end with. */
interface UnreadCall {
  readonly call: ReturnType<GrpcClient['open']>;
  readonly status: Promise<Message>;
}

/** Reads a paused call to its end: the messages' bytes and the status it ended with. */
async function finish(unread: UnreadCall): Promise<{ bytes: number; status: Message }> {
  let bytes = 0;
  unread.call.on('data', (m: Message) => (bytes += (m.data as Buffer).length));
  unread.call.resume();
  return { status: await unread.status, bytes };
}

describe('clients that do not read', () => {
  it('hold a bounded part of the server while their commands block on their pipes', async () => {
    const { served, api, grpc, cb, sandbox, heads, stream } = await setUp();
    const pid = served.child.pid as number;
    await writeFile(`/proc/${pid}/clear_refs`, '5'); // the peak (VmHWM) starts again from here
    const before = await memoryOf(pid);

    for (let i = 0; i < STREAMS; i++) stream(OUTPUT);
    await Promise.all(
      Array.from({ length: DOWNLOADS }, () => unreadRequest(served, `/v1/codebases/${cb}/files/big.bin`)),
    );
    // Every command is blocked writing its output, as on a terminal nobody reads.
    await until(async () => (await heads()).length === STREAMS, 15_000, `${STREAMS} commands started`);
    await until(
      async () => (await heads()).every((channel) => channel.endsWith('pipe_write')),
      15_000,
      'every command blocked on its output pipe',
    );
    const settled = await memoryOf(pid);
    await new Promise((done) => setTimeout(done, 4000));
    // Other calls answer meanwhile.
    const started = performance.now();
    expect((await api('GET', `/v1/sandboxes/${sandbox.id}`)).status).toBe(200);
    const getMs = performance.now() - started;
    const exec = await grpc.unary('sandbox', 'Exec', { sandbox_id: sandbox.id, command: 'echo hi' });
    const execMs = performance.now() - started - getMs;
    expect(String(exec.stdout)).toBe('hi\n');
    const after = await memoryOf(pid);
    console.log(
      `serve RSS ${(before.rss / MiB) | 0} MiB, then ${(settled.rss / MiB) | 0}, ${(after.rss / MiB) | 0} MiB ` +
        `4 s later (peak ${(after.peak / MiB) | 0}); GetSandbox ${getMs | 0} ms, Exec ${execMs | 0} ms`,
    );
    expect(after.peak - before.rss).toBeLessThan(GROWTH_BOUND);
    expect(after.rss - settled.rss).toBeLessThan(DRIFT_BOUND);
    expect(getMs).toBeLessThan(2000);
    expect(execMs).toBeLessThan(2000);
  });

  it('end the stream of a client that reads nothing for the stall time, with an error saying so', async () => {
    const { served, cb, sandbox, heads, stream } = await setUp({ AGENTFENSE_STREAM_STALL_SECONDS: '2' });
    const early = stream(OUTPUT);
    const late = stream(OUTPUT);
    const ndjson = await unreadRequest(served, `/v1/sandboxes/${sandbox.id}/exec/stream`, {
      command: OUTPUT,
    });
    const download = await unreadRequest(served, `/v1/codebases/${cb}/files/big.bin`);
    // The stalls stop the commands (and nothing else does: they would write 200 MB each).
    await until(async () => (await heads()).length === 3, 10_000, 'three commands started');
    await until(async () => (await heads()).length === 0, 15_000, 'the stalled commands stopped');

    // A client that resumes within the grace reads what waited, then why the stream ended.
    const stalled =
      /^the client read nothing of this stream for \d+(\.\d)? s while \d+ bytes waited for it: the stream is ended and its command is stopped/;
    const ended = await finish(early);
    expect(ended.status.code).toBe(status.DEADLINE_EXCEEDED);
    expect(ended.status.details).toMatch(stalled);
    expect(ended.bytes).toBeGreaterThan(0);
    const lines = (await readRest(ndjson)).text.trim().split('\n');
    const last = JSON.parse(lines.at(-1) ?? '{}');
    expect(last.done, lines.at(-1)).toBe(true);
    expect(last.error.code).toBe(4);
    expect(last.error.message).toMatch(stalled);
    // One that reads nothing past the grace too (5 s at least) finds the call reset, its messages freed.
    await new Promise((done) => setTimeout(done, 6_000));
    expect((await finish(late)).status.code).toBe(status.CANCELLED);
    // A download cannot carry an error once its body began: its connection is closed, the body short.
    // Read only now: its stall clock starts once the socket buffers are full, which on a loaded machine
    // can be well after the commands' clocks (read at once, it was sometimes read whole before it fired).
    const body = await readRest(download);
    expect(body.complete).toBe(false);
    expect(body.bytes).toBeLessThan(FILE_BYTES);
  });
});
