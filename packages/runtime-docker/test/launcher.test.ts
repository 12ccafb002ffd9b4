// The host side of a container's launcher (src/launcher.ts): the directory, the listener that accepts one
// connection and disappears (others queued with it are closed and logged), and a data directory whose
// paths are longer than a Unix socket path may be.
// A real af-init in a container: test/runtime/docker.test.ts and test/security/docker-launcher.test.ts.
import { mkdtempSync, openSync, closeSync, readdirSync, rmSync, statSync } from 'node:fs';
import { constants } from 'node:fs';
import { createConnection } from 'node:net';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AF_INIT_PROTOCOL_VERSION, LauncherFrameType, encodeLauncherFrame } from '@agentfense/launcher';
import { listenForLauncher } from '../src/launcher/launcher.js';

const quiet = { debug: () => undefined, warn: () => undefined };
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

/** Connects to `dir/sock` through the directory's descriptor (the path may be too long to name). */
function connectIn(dir: string): Promise<Socket | NodeJS.ErrnoException> {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  return new Promise((resolve) => {
    const s = createConnection(`/proc/self/fd/${String(fd)}/sock`);
    s.once('connect', () => resolve(s));
    s.once('error', (err) => resolve(err));
  }).finally(() => closeSync(fd)) as Promise<Socket | NodeJS.ErrnoException>;
}

describe.skipIf(process.getuid?.() !== 0)('listenForLauncher (needs root: chown to the sandbox gid)', () => {
  it('accepts one connection, then nobody can connect, in a directory with a path over 108 bytes', async () => {
    const parent = join(mkdtempSync(join(tmpdir(), 'af-launcher-')), 'd'.repeat(120));
    cleanups.push(() => rmSync(parent.slice(0, parent.lastIndexOf('/')), { recursive: true, force: true }));
    const listener = await listenForLauncher({ parent, user: '2000000000:2000000000', logger: quiet });
    cleanups.push(() => void listener.release());
    expect(listener.dir.length).toBeGreaterThan(108);
    expect(readdirSync(listener.dir).sort()).toEqual(['af-init', 'sock']);
    expect(statSync(listener.dir).mode & 0o777).toBe(0o710);
    expect(statSync(listener.dir).gid).toBe(2000000000);
    expect(statSync(join(listener.dir, 'sock')).mode & 0o777).toBe(0o660);

    const first = await connectIn(listener.dir);
    expect(first).toHaveProperty('write');
    const ready = Buffer.alloc(8);
    ready.writeUInt32LE(AF_INIT_PROTOCOL_VERSION, 0);
    ready.writeUInt32LE(1, 4);
    (first as Socket).write(encodeLauncherFrame(LauncherFrameType.READY, 0, ready));
    const client = await listener.client;
    expect(client.pid).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(readdirSync(listener.dir)).toEqual(['af-init']);
    const second = await connectIn(listener.dir);
    expect(second).toMatchObject({ code: 'ENOENT' });
    (first as Socket).destroy();
    await listener.release();
    expect(() => statSync(listener.dir)).toThrow(/ENOENT/);
  });

  it('keeps only the first of connections queued in one tick: the others are closed at once and logged', async () => {
    const parent = mkdtempSync(join(tmpdir(), 'af-launcher-'));
    cleanups.push(() => rmSync(parent, { recursive: true, force: true }));
    const warnings: string[] = [];
    const logger = { debug: () => undefined, warn: (_obj: object, msg: string) => warnings.push(msg) };
    const listener = await listenForLauncher({ parent, user: '2000000000:2000000000', logger });
    cleanups.push(() => void listener.release());
    // Three connects land in the listen backlog while this thread is busy: the host then sees all three
    // in one go (Unix sockets connect synchronously into the backlog).
    const sockets = [0, 1, 2].map(() => createConnection(join(listener.dir, 'sock')));
    const closed = sockets.map(
      (s) =>
        new Promise<'closed'>((resolve) => {
          s.on('error', () => undefined);
          s.once('close', () => resolve('closed'));
        }),
    );
    const busyUntil = Date.now() + 200;
    while (Date.now() < busyUntil) {
      // Let all three reach the backlog before the host accepts any.
    }
    const [first, ...others] = sockets as [Socket, Socket, Socket];
    // The listener stays open until af-init's READY, refusing the two others meanwhile.
    await Promise.all(closed.slice(1));
    expect(others.every((s) => s.destroyed)).toBe(true);
    expect(warnings.filter((w) => /second connection to the container launcher/.test(w))).toHaveLength(2);
    expect(readdirSync(listener.dir)).toEqual(['af-init']);
    const ready = Buffer.alloc(8);
    ready.writeUInt32LE(AF_INIT_PROTOCOL_VERSION, 0);
    ready.writeUInt32LE(1, 4);
    first.write(encodeLauncherFrame(LauncherFrameType.READY, 0, ready));
    expect((await listener.client).pid).toBe(1);
    // The first is still af-init's connection.
    expect(first.destroyed).toBe(false);
    first.destroy();
    await listener.release();
  });
});
