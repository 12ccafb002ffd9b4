// The launcher client against a hostile af-init: a command in the sandbox runs with af-init's uid and can
// ptrace it, so whatever arrives on the connection is checked. Each violation closes the connection and
// fails what is pending with a clear error; none makes the host buffer without bound or hang.
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  AF_INIT_MAX_FRAME_LENGTH,
  AF_INIT_PROTOCOL_VERSION,
  LauncherClient,
  LauncherFrameDecoder,
  LauncherFrameType as T,
  encodeLauncherFrame,
} from '../src/index.js';
import type { LauncherFrame } from '../src/index.js';

const cleanups: (() => void)[] = [];

afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

/** A fake af-init: the test writes its frames by hand on `peer`. */
async function pair(): Promise<{ host: Socket; peer: Socket }> {
  const dir = mkdtempSync(join(tmpdir(), 'af-launcher-'));
  const path = join(dir, 'sock');
  const server: Server = createServer();
  const peerP = new Promise<Socket>((resolve) => server.once('connection', resolve));
  await new Promise<void>((resolve) => server.listen(path, resolve));
  const host = createConnection(path);
  const peer = await peerP;
  cleanups.push(() => {
    host.destroy();
    peer.destroy();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { host, peer };
}

function ready(pid = 1): Buffer {
  const p = Buffer.alloc(8);
  p.writeUInt32LE(AF_INIT_PROTOCOL_VERSION, 0);
  p.writeUInt32LE(pid, 4);
  return encodeLauncherFrame(T.READY, 0, p);
}

function u32(...values: number[]): Buffer {
  const b = Buffer.alloc(4 * values.length);
  values.forEach((v, i) => b.writeUInt32LE(v, 4 * i));
  return b;
}

async function connected(): Promise<{ client: LauncherClient; peer: Socket }> {
  const { host, peer } = await pair();
  peer.write(ready());
  return { client: await LauncherClient.connect(host), peer };
}

describe('LauncherClient against a hostile af-init', () => {
  it('fails at once on a frame length over the maximum, without waiting for the bytes', async () => {
    const { client, peer } = await connected();
    const cmd = client.spawn({ argv: ['true'], cwd: '/', env: {} });
    const header = Buffer.alloc(4);
    header.writeUInt32LE(AF_INIT_MAX_FRAME_LENGTH + 1, 0);
    peer.write(header);
    await expect(cmd.done).rejects.toMatchObject({
      code: 'AF_PROTOCOL',
      message: expect.stringMatching(/frame length/) as unknown,
    });
    expect(client.alive).toBe(false);
  });

  it('closes the connection on frames for ids it never gave out, output before STARTED, or a second READY', async () => {
    const cases: Buffer[] = [
      encodeLauncherFrame(T.STDOUT, 99, Buffer.from('x')),
      encodeLauncherFrame(T.STDOUT, 1, Buffer.from('x')), // id 1 was spawned but not STARTED
      ready(),
      encodeLauncherFrame(T.PONG, 1234),
      encodeLauncherFrame(77, 1),
      encodeLauncherFrame(T.STDOUT, 1, Buffer.alloc(64 * 1024 + 1)),
    ];
    for (const frame of cases) {
      const { client, peer } = await connected();
      const cmd = client.spawn({ argv: ['true'], cwd: '/', env: {} });
      if (frame.readUInt8(4) === T.STDOUT && frame.length > 1000)
        peer.write(encodeLauncherFrame(T.STARTED, 1, u32(5)));
      peer.write(frame);
      await expect(cmd.done).rejects.toMatchObject({ code: 'AF_PROTOCOL' });
      const closed = await client.closed;
      expect(closed.message).toMatch(/af-init broke the protocol/);
    }
  });

  it('a protocol version it does not speak is refused with the fix', async () => {
    const { host, peer } = await pair();
    const p = Buffer.alloc(8);
    p.writeUInt32LE(1, 0);
    peer.write(encodeLauncherFrame(T.READY, 0, p));
    await expect(LauncherClient.connect(host)).rejects.toThrow(/protocol 1.*pnpm build/);
  });

  it('an af-init that never says READY is reported unavailable after the timeout', async () => {
    const { host } = await pair();
    await expect(LauncherClient.connect(host, { readyTimeoutMs: 100 })).rejects.toMatchObject({
      code: 'AF_UNAVAILABLE',
      message: expect.stringMatching(/did not say READY within 100 ms/) as unknown,
    });
  });

  it('a peer that closes fails everything pending with AF_UNAVAILABLE', async () => {
    const { client, peer } = await connected();
    const cmd = client.spawn({ argv: ['true'], cwd: '/', env: {} });
    peer.write(encodeLauncherFrame(T.STARTED, cmd.id, u32(5)));
    expect(await cmd.pid).toBe(5);
    const ping = client.ping();
    peer.destroy();
    await expect(cmd.done).rejects.toMatchObject({ code: 'AF_UNAVAILABLE' });
    await expect(ping).rejects.toMatchObject({ code: 'AF_UNAVAILABLE' });
  });
});

/** What the host sent to the fake af-init, frame by frame. */
function framesFrom(peer: Socket): LauncherFrame[] {
  const decoder = new LauncherFrameDecoder();
  const frames: LauncherFrame[] = [];
  peer.on('data', (chunk: Buffer) => frames.push(...decoder.push(chunk)));
  return frames;
}

/** Lets the event loop run until `check` holds (at most 2 s). */
async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((done) => setTimeout(done, 10));
  expect(check()).toBe(true);
}

describe('LauncherClient back-pressure, per command', () => {
  const chunk = Buffer.alloc(64 * 1024, 1);

  it('PAUSEs a command whose consumer stopped, RESUMEs it when read again; the others flow', async () => {
    const { client, peer } = await connected();
    const sent = framesFrom(peer);
    const slow = client.spawn({ argv: ['slow'], cwd: '/', env: {} });
    const fast = client.spawn({ argv: ['fast'], cwd: '/', env: {} });
    peer.write(encodeLauncherFrame(T.STARTED, slow.id, u32(5)));
    peer.write(encodeLauncherFrame(T.STARTED, fast.id, u32(6)));
    let fastBytes = 0;
    fast.stdout.on('data', (c: Buffer) => (fastBytes += c.length));
    for (let i = 0; i < 4; i++) {
      peer.write(encodeLauncherFrame(T.STDOUT, slow.id, chunk));
      peer.write(encodeLauncherFrame(T.STDOUT, fast.id, chunk));
    }
    const flow = (): number[] =>
      sent.filter((f) => f.type === T.PAUSE || f.type === T.RESUME).map((f) => f.type);
    // Nobody reads the slow one: it is paused once (not the connection: the fast one gets all of its).
    await until(() => fastBytes === 4 * chunk.length);
    expect(sent.filter((f) => f.type === T.PAUSE).map((f) => f.id)).toEqual([slow.id]);
    expect(slow.stdout.readableLength).toBe(4 * chunk.length);
    // Reading it again resumes it.
    let slowBytes = 0;
    slow.stdout.on('data', (c: Buffer) => (slowBytes += c.length));
    await until(() => slowBytes === 4 * chunk.length && flow().length === 2);
    expect(flow()).toEqual([T.PAUSE, T.RESUME]);
    expect(sent.filter((f) => f.type === T.RESUME).map((f) => f.id)).toEqual([slow.id]);
  });

  it('stops reading the connection when a peer ignores PAUSE, so what it sends stays bounded', async () => {
    const { client, peer } = await connected();
    const cmd = client.spawn({ argv: ['flood'], cwd: '/', env: {} });
    peer.write(encodeLauncherFrame(T.STARTED, cmd.id, u32(5)));
    // 16 MiB for a command nobody reads: the host takes 8 MiB (what af-init may legitimately have in
    // flight is far less), then leaves the rest in the socket.
    const flood = (): void => {
      for (let i = 0; i < 256; i++) peer.write(encodeLauncherFrame(T.STDOUT, cmd.id, chunk));
    };
    flood();
    await until(() => cmd.stdout.readableLength > 8 * 1024 * 1024);
    await new Promise((done) => setTimeout(done, 200));
    expect(cmd.stdout.readableLength).toBeLessThanOrEqual(8 * 1024 * 1024 + chunk.length);
    expect(peer.writableLength).toBeGreaterThan(0);
    // Reading resumes the connection.
    let read = 0;
    cmd.stdout.on('data', (c: Buffer) => (read += c.length));
    await until(() => read === 256 * chunk.length);
  });
});
